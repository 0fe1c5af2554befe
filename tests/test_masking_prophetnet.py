"""ProphetNet's masks, relative-position buckets and span corruption against brute-force
definitions (nested loops over i, j), and their dtype safety."""

import math

import numpy as np
import pytest
import torch

from fairseq_ext.masking import (
    additive_attention_mask,
    block_span_mask,
    ngram_stream_buckets,
    replace_80_10_10,
    span_lengths,
)
from fairseq_ext.masking.ngram_stream import (
    main_stream_mask,
    ngram_stream_key_mask,
    ngram_stream_mask,
    predicting_stream_main_mask,
    relative_position_bucket,
)


def brute_ngram_stream_mask(T, n):
    """Rows/columns: (stream s, index t), s = 0 main; stream k at t predicts target t from the
    main states up to t - k + 1 (the start symbol always visible) and sees itself."""
    size = (1 + n) * T
    m = torch.zeros(size, size, dtype=torch.bool)
    for qs in range(1 + n):
        for t in range(T):
            for ks in range(1 + n):
                for j in range(T):
                    if qs == 0:
                        ok = ks == 0 and j <= t
                    elif ks == 0:
                        ok = j <= max(t - qs + 1, 0)
                    else:
                        ok = ks == qs and j == t
                    m[qs * T + t, ks * T + j] = ok
    return m


@pytest.mark.parametrize("T,n", [(1, 1), (5, 1), (6, 2), (7, 3), (3, 5)])
def test_ngram_stream_mask_matches_brute_force(T, n):
    full = ngram_stream_mask(T, n)
    assert full.shape == ((1 + n) * T, (1 + n) * T) and full.dtype == torch.bool
    assert torch.equal(full, brute_ngram_stream_mask(T, n))
    assert torch.equal(full[:T, :T], main_stream_mask(T))
    assert torch.equal(full[T:, :T], predicting_stream_main_mask(T, n).reshape(n * T, T))


@pytest.mark.parametrize("T,n", [(1, 1), (6, 2), (7, 3)])
def test_key_mask_is_the_full_mask_folded(T, n):
    """[main keys, own key] loses nothing: a query sees no predicting key but its own."""
    full, folded = ngram_stream_mask(T, n), ngram_stream_key_mask(T, n)
    assert folded.shape == ((1 + n) * T, T + 1)
    for r in range(full.size(0)):
        assert torch.equal(folded[r, :T], full[r, :T])
        own = bool(full[r, r]) if r >= T else False
        assert bool(folded[r, T]) == own
        others = [c for c in range(T, full.size(1)) if c != r]
        assert not full[r, others].any()


def test_ngram_stream_mask_rejects_zero_streams():
    with pytest.raises(ValueError, match="ngram"):
        predicting_stream_main_mask(4, 0)


def brute_bucket(rel, num_buckets, max_distance, bidirectional):
    """T5's rule with Python floats: own bucket below num_buckets // 2, log-spaced above."""
    n, offset = -rel, 0
    if bidirectional:
        num_buckets //= 2
        offset = num_buckets if n < 0 else 0
        n = abs(n)
    else:
        n = max(n, 0)
    exact = num_buckets // 2
    if n < exact:
        return offset + n
    far = exact + int(math.log(n / exact) / math.log(max_distance / exact) * (num_buckets - exact))
    return offset + min(far, num_buckets - 1)


@pytest.mark.parametrize(
    "num_buckets,max_distance,bidirectional",
    [(32, 128, False), (8, 16, False), (2, 3, False), (32, 128, True), (10, 40, True)],
)
def test_relative_position_bucket_matches_brute_force(num_buckets, max_distance, bidirectional):
    rel = torch.arange(-300, 301)
    got = relative_position_bucket(rel, num_buckets, max_distance, bidirectional)
    want = torch.tensor(
        [brute_bucket(int(r), num_buckets, max_distance, bidirectional) for r in rel]
    )
    assert torch.equal(got, want)
    assert got.min() >= 0 and got.max() == num_buckets - 1


def test_relative_position_bucket_rejects_degenerate_sizes():
    with pytest.raises(ValueError, match="max_distance"):
        relative_position_bucket(torch.arange(4), num_buckets=32, max_distance=16)
    with pytest.raises(ValueError, match="num_buckets"):
        relative_position_bucket(torch.arange(4), num_buckets=1, max_distance=16)


def test_ngram_stream_buckets_match_brute_force():
    positions = torch.tensor([[2, 3, 4, 5, 6], [9, 10, 11, 30, 31]])  # the second: two spans
    n, nb, md = 2, 8, 16
    got = ngram_stream_buckets(positions, n, nb, md)
    assert got.shape == (2, 3 * 5, 5)
    for b in range(2):
        for s in range(1 + n):
            for t in range(5):
                for j in range(5):
                    query = int(positions[b, t]) + (1 if s else 0)
                    want = brute_bucket(int(positions[b, j]) - query, nb, md, False)
                    assert int(got[b, s * 5 + t, j]) == want


def _blocks(maskable, block_size):
    where = np.flatnonzero(maskable).tolist()
    return [where[i : i + block_size] for i in range(0, len(where), block_size)]


def test_block_span_mask_one_contiguous_span_per_block():
    maskable = np.ones(200, dtype=bool)
    maskable[[0, 57, 130, 199]] = False  # special symbols in the middle are skipped, not chosen
    block_size, ratio = 64, 0.15
    starts = [set() for _ in range(4)]
    for seed in range(300):
        rng = np.random.default_rng(seed)
        chosen = block_span_mask(maskable, rng, block_size, ratio)
        assert not (chosen & ~maskable).any()
        for i, block in enumerate(_blocks(maskable, block_size)):
            picked = [k for k, pos in enumerate(block) if chosen[pos]]
            assert len(picked) == max(1, round(ratio * len(block)))
            assert picked == list(
                range(picked[0], picked[0] + len(picked))
            )  # contiguous in the block
            starts[i].add(picked[0])
        assert int(chosen.sum()) == sum(
            max(1, round(ratio * len(b))) for b in _blocks(maskable, block_size)
        )
    # uniform starts: every possible start of the full blocks turned up in 300 draws
    assert starts[0] == set(range(64 - 10 + 1)) and starts[1] == set(range(64 - 10 + 1))


def test_block_span_mask_is_reproducible_and_covers_short_lines():
    maskable = np.array([False, True, True, True, False])
    a = block_span_mask(maskable, np.random.default_rng(3))
    b = block_span_mask(maskable, np.random.default_rng(3))
    assert np.array_equal(a, b) and int(a.sum()) == 1  # 15% of 3 tokens rounds to 0: one token
    assert not block_span_mask(np.zeros(4, dtype=bool), np.random.default_rng(0)).any()


@pytest.mark.parametrize("rng", [np.random.RandomState(0), torch.Generator().manual_seed(0), None])
def test_per_example_rules_refuse_other_generators(rng):
    """One convention: per-example rules draw from a numpy Generator (masking.example_rng)."""
    maskable = np.ones(5, dtype=bool)
    with pytest.raises(ValueError, match="numpy.random.Generator"):
        block_span_mask(maskable, rng)
    with pytest.raises(ValueError, match="numpy.random.Generator"):
        replace_80_10_10(np.arange(5), maskable, rng, 7, random_prob=0.0)


def _uniform_weights(low, high):
    w = np.zeros(high)
    w[low:high] = 1.0 / (high - low)
    return w


def test_replace_80_10_10_statistics():
    tokens = np.arange(10, 20010)
    chosen = np.zeros(len(tokens), dtype=bool)
    chosen[::2] = True
    out, kind = replace_80_10_10(
        tokens,
        chosen,
        np.random.default_rng(0),
        mask_value=7,
        replacement_weights=_uniform_weights(4, 7),
    )
    assert np.array_equal(out[~chosen], tokens[~chosen]) and not kind[~chosen].any()
    n = int(chosen.sum())
    share = [float((kind == k).sum()) / n for k in (1, 2, 3)]
    assert abs(share[0] - 0.8) < 0.015 and abs(share[1] - 0.1) < 0.01 and abs(share[2] - 0.1) < 0.01
    assert (out[kind == 1] == 7).all()
    assert ((out[kind == 2] >= 4) & (out[kind == 2] < 7)).all()
    assert np.array_equal(out[kind == 3], tokens[kind == 3])
    # the random values are uniform over [4, 7): each of the three about a third of them
    for v in (4, 5, 6):
        got = float((out[kind == 2] == v).mean())
        assert abs(got - 1 / 3) < 5 * math.sqrt(2 / 9 / int((kind == 2).sum()))


@pytest.mark.parametrize("length", [*range(0, 140), 191, 192, 193, 500])
def test_span_lengths_is_the_count_of_block_span_mask(length):
    """The dataset's target size (span_lengths) against the mask itself and a brute-force
    count (one span of max(1, round(0.15 m)) per block of m tokens, Python's round)."""
    maskable = np.ones(length + 3, dtype=bool)
    maskable[[0, -1]] = False
    maskable[length // 2 + 1] = False  # a special symbol inside does not count
    m = int(maskable.sum())
    brute = sum(max(1, round(0.15 * min(64, m - s))) for s in range(0, m, 64))
    assert int(span_lengths(m)) == brute
    assert int(block_span_mask(maskable, np.random.default_rng(length)).sum()) == brute
    assert span_lengths(np.array([m, m]), 64, 0.15).tolist() == [brute, brute]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_additive_mask_and_attention_stay_finite_in_half_precision(dtype):
    from fairseq_ext.modules import NgramSelfAttention

    allowed = ngram_stream_key_mask(6, 2)
    add = additive_attention_mask(allowed, dtype)
    assert add.dtype == dtype and torch.isfinite(add).all()
    assert (add[allowed] == 0).all() and (add[~allowed] == torch.finfo(dtype).min).all()
    scores = torch.randn(allowed.shape, dtype=dtype) * 30 + add
    probs = torch.softmax(scores.float(), -1)
    assert torch.isfinite(probs).all() and (probs[~allowed] == 0).all()

    torch.manual_seed(0)
    attn = NgramSelfAttention(16, 2, ngram=2, num_buckets=8).eval()
    x = torch.randn(3 * 6, 2, 16) * 10
    buckets = ngram_stream_buckets(torch.arange(6), 2, 8, 16)
    key_mask = additive_attention_mask(allowed, torch.float32)
    with torch.no_grad():
        want = attn(x, buckets, key_mask)
        got = attn.to(dtype)(x.to(dtype), buckets, key_mask)
    assert got.dtype == dtype and torch.isfinite(got).all()
    assert torch.allclose(got.float(), want, atol=0.15 * float(want.abs().max()))

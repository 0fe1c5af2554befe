"""HI-CMLM's masking functions against brute-force definitions."""

import math

import pytest
import torch

from fairseq_ext.masking import (
    mix_decoder_input,
    soft_copy,
    source_copy_weight,
    training_copy_weight,
    uniform_count_mask,
)
from fairseq_ext.masking.hybrid import (
    decoder_fence,
    fence_pattern,
    random_copy_slots,
    relative_position_copy_weights,
)


def _rows_masks(lengths, width, left=False):
    m = torch.zeros(len(lengths), width, dtype=torch.bool)
    for b, n in enumerate(lengths):
        if left:
            m[b, width - n :] = True
        else:
            m[b, :n] = True
    return m


# --- uniform_count_mask -------------------------------------------------------------------


def test_uniform_count_never_masks_unmaskable_and_masks_at_least_one():
    g = torch.Generator().manual_seed(0)
    maskable = _rows_masks([1, 5, 9, 12], 14)
    maskable[:, 0] = False  # <s>
    for _ in range(200):
        m = uniform_count_mask(maskable, generator=g)
        assert not (m & ~maskable).any()
        counts = m.sum(1)
        n = maskable.sum(1)
        assert ((counts >= n.clamp(max=1)) & (counts <= n)).all()


def test_uniform_count_distribution_matches_definition():
    """k ~ U{1..n}, then each maskable slot equally likely: P(slot masked) = (n+1)/(2n)."""
    g = torch.Generator().manual_seed(1)
    n = 6
    maskable = torch.ones(1, n, dtype=torch.bool).repeat(20000, 1)
    m = uniform_count_mask(maskable, generator=g)
    k = m.sum(1)
    freq = torch.bincount(k, minlength=n + 1)[1:].float() / len(k)
    assert torch.allclose(freq, torch.full((n,), 1 / n), atol=0.012), freq
    per_slot = m.float().mean(0)
    assert torch.allclose(per_slot, torch.full((n,), (n + 1) / (2 * n)), atol=0.015)


def test_uniform_count_row_without_maskable_gets_no_mask():
    maskable = torch.zeros(3, 4, dtype=torch.bool)
    assert not uniform_count_mask(maskable).any()


def test_uniform_count_rejects_non_bool():
    with pytest.raises(ValueError):
        uniform_count_mask(torch.ones(2, 3))


# --- soft copy ----------------------------------------------------------------------------


def _brute_weights(tgt_mask, src_mask, tau):
    B, T = tgt_mask.shape
    S = src_mask.shape[1]
    out = torch.zeros(B, T, S, dtype=torch.float64)
    for b in range(B):
        src_pos = [j for j in range(S) if src_mask[b, j]]
        tgt_pos = [i for i in range(T) if tgt_mask[b, i]]
        LX, LY = len(src_pos), len(tgt_pos)
        for ti, i in enumerate(tgt_pos):
            logits = [-abs(ti / LY - sj / LX) / tau for sj in range(LX)]
            z = sum(math.exp(v) for v in logits)
            for sj, j in enumerate(src_pos):
                out[b, i, j] = math.exp(logits[sj]) / z
    return out


@pytest.mark.parametrize("left_pad_source", [False, True])
def test_copy_weights_match_equations_8_9(left_pad_source):
    tgt = _rows_masks([5, 3, 7], 7)
    src = _rows_masks([4, 6, 2], 6, left=left_pad_source)
    for tau in (0.2, 1.0):
        w = relative_position_copy_weights(tgt, src, tau).double()
        ref = _brute_weights(tgt, src, tau)
        valid = tgt.unsqueeze(-1).expand_as(ref)
        assert torch.allclose(w[valid], ref[valid], atol=1e-6)
        assert (w.masked_select(~src.unsqueeze(1).expand_as(w)) == 0).all()
        assert torch.allclose(w.sum(-1), torch.ones_like(w.sum(-1)), atol=1e-5)


def test_soft_copy_is_weighted_sum_of_embeddings():
    torch.manual_seed(0)
    tgt = _rows_masks([4, 2], 4)
    src = _rows_masks([3, 5], 5, left=True)
    e = torch.randn(2, 5, 8)
    z = soft_copy(e, src, tgt, 0.2)
    ref = torch.einsum("bts,bsc->btc", _brute_weights(tgt, src, 0.2), e.double())
    assert torch.allclose(z.double()[tgt], ref[tgt], atol=1e-5)


def test_low_temperature_copies_nearest_source_token():
    tgt = _rows_masks([4], 4)
    src = _rows_masks([4], 4)
    w = relative_position_copy_weights(tgt, src, 1e-3)
    assert torch.equal(w.argmax(-1), torch.arange(4).unsqueeze(0))


@pytest.mark.parametrize("tau", [0.0, -0.5])
def test_copy_rejects_non_positive_temperature(tau):
    with pytest.raises(ValueError, match="temperature"):
        relative_position_copy_weights(_rows_masks([2], 2), _rows_masks([2], 2), tau)


def test_copy_is_finite_in_half_precision():
    tgt = _rows_masks([3, 2], 3)
    src = _rows_masks([2, 3], 3)
    e = torch.randn(2, 3, 4, dtype=torch.float16)
    assert torch.isfinite(soft_copy(e, src, tgt, 0.2)).all()
    assert torch.isfinite(soft_copy(e.bfloat16(), src, tgt, 0.2)).all()


# --- fence and hybrid input ---------------------------------------------------------------

# The paper's fence as it is written (section 3.2), over the target slots from the first word.
PAPER_FENCE = [0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1]


def test_fence_pattern_is_the_papers_vector():
    assert fence_pattern(7, "mask").int().tolist() == PAPER_FENCE[:7]
    assert fence_pattern(7, "copy").int().tolist() == [1 - v for v in PAPER_FENCE[:7]]
    assert fence_pattern(0, "mask").numel() == 0


def test_decoder_fence_starts_after_bos():
    assert decoder_fence(9, "mask").int().tolist() == [0] + PAPER_FENCE[:8]
    assert decoder_fence(9, "copy").int().tolist() == [0] + [1 - v for v in PAPER_FENCE[:8]]
    with pytest.raises(ValueError, match="fence phase"):
        fence_pattern(3, "odd")


def _brute_weight(masked, strategy, w, fence_first="mask"):
    """Decoder index i holds target word i - 1; the fence literal is read at that word."""
    literal = PAPER_FENCE if fence_first == "mask" else [1 - v for v in PAPER_FENCE]
    out = torch.zeros(masked.shape)
    for b in range(masked.size(0)):
        for i in range(masked.size(1)):
            if not masked[b, i]:
                continue
            out[b, i] = {
                "all_mask": 0.0,
                "all_copied": 1.0,
                "weighted_sum": 1 - w,
                "fence_replace": float(literal[i - 1]) if i >= 1 else 0.0,
            }[strategy]
    return out


@pytest.mark.parametrize("fence_first", ["mask", "copy"])
@pytest.mark.parametrize("strategy", ["all_mask", "all_copied", "weighted_sum", "fence_replace"])
def test_source_copy_weight_matches_definition(strategy, fence_first):
    g = torch.Generator().manual_seed(3)
    masked = torch.rand(4, 12, generator=g) < 0.5
    masked[:, 0] = False  # <s> is never masked
    got = source_copy_weight(masked, strategy, 0.6, fence_first)
    assert torch.allclose(got, _brute_weight(masked, strategy, 0.6, fence_first))


def test_fence_gives_the_first_target_word_m_and_the_second_z():
    masked = torch.tensor([[False, True, True, True, False]])  # <s> y1 y2 y3 </s>
    assert source_copy_weight(masked, "fence_replace", 0.6, "mask").tolist() == [
        [0.0, 0.0, 1.0, 0.0, 0.0]
    ]
    assert source_copy_weight(masked, "fence_replace", 0.6, "copy").tolist() == [
        [0.0, 1.0, 0.0, 1.0, 0.0]
    ]


def _corrupt(rows, width, seed):
    g = torch.Generator().manual_seed(seed)
    maskable = _rows_masks(rows, width)
    maskable[:, 0] = False
    return uniform_count_mask(maskable, generator=g), g


@pytest.mark.parametrize("share", [0.2, 0.5, 0.9])
def test_random_copy_slots_share_among_masked(share):
    """Section 3.3: Z replaces a random subset of the masked slots; the corrupted slots stay
    CMLM's. Binomial bound: 4.5 standard deviations of the share over the masked slots."""
    masked, g = _corrupt([30] * 400, 32, seed=7)
    chosen = random_copy_slots(masked, share, generator=g)
    assert not (chosen & ~masked).any()
    n = int(masked.sum())
    got = int(chosen.sum()) / n
    assert abs(got - share) < 4.5 * math.sqrt(share * (1 - share) / n), (got, share, n)


def test_random_copy_slots_extremes_and_a_non_bool_mask():
    masked, g = _corrupt([10] * 50, 12, seed=1)
    assert not random_copy_slots(masked, 0.0, generator=g).any()
    assert torch.equal(random_copy_slots(masked, 1.0, generator=g), masked)
    with pytest.raises(ValueError, match="bool"):
        random_copy_slots(masked.float(), 0.5)


def test_paper_training_input_is_the_same_for_every_strategy():
    masked, _ = _corrupt([9, 12, 5], 14, seed=2)
    weights = []
    for strategy in ("all_mask", "all_copied", "weighted_sum", "fence_replace"):
        g = torch.Generator().manual_seed(11)
        weights.append(
            training_copy_weight(masked, "paper", 0.5, strategy, 0.6, "mask", generator=g)
        )
    assert all(torch.equal(w, weights[0]) for w in weights)
    assert set(weights[0][masked].unique().tolist()) == {0.0, 1.0}
    assert (weights[0][~masked] == 0).all()


@pytest.mark.parametrize("strategy", ["all_mask", "all_copied", "weighted_sum", "fence_replace"])
def test_decoding_rule_training_input_is_the_decoding_input(strategy):
    masked, _ = _corrupt([9, 12, 5], 14, seed=4)
    assert torch.equal(
        training_copy_weight(masked, "decoding_rule", 0.5, strategy, 0.6, "mask"),
        source_copy_weight(masked, strategy, 0.6, "mask"),
    )
    with pytest.raises(ValueError, match="training input"):
        training_copy_weight(masked, "sometimes", 0.5, strategy, 0.6, "mask")


@pytest.mark.parametrize("strategy", ["all_mask", "all_copied", "weighted_sum", "fence_replace"])
def test_mix_puts_m_and_z_where_they_belong(strategy):
    B, T, C = 2, 8, 3
    M = torch.full((B, T, C), 1.0)  # every slot "is" M (masked) or a token embedding
    M[:, ::3] = 7.0  # some observed-token embeddings
    Z = torch.full((B, T, C), -1.0)
    masked = torch.zeros(B, T, dtype=torch.bool)
    masked[:, 1:6] = True
    masked[1, 6:] = False  # row 1 padded at the end, never masked
    x = mix_decoder_input(M, Z, source_copy_weight(masked, strategy, 0.6, "mask"))
    for b in range(B):
        for i in range(T):
            if not masked[b, i]:
                expected = M[b, i]
            elif strategy == "all_mask" or (
                strategy == "fence_replace" and PAPER_FENCE[i - 1] == 0
            ):
                expected = M[b, i]
            elif strategy == "weighted_sum":
                expected = 0.6 * M[b, i] + 0.4 * Z[b, i]
            else:
                expected = Z[b, i]
            assert torch.allclose(x[b, i], expected), (strategy, b, i)


def test_hybrid_rejects_an_unknown_strategy():
    masked = torch.ones(1, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match="unknown hybrid strategy"):
        source_copy_weight(masked, "half_copied", 0.6, "mask")

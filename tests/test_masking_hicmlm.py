"""HI-CMLM's masking functions against brute-force definitions."""
import math

import pytest
import torch

from fairseq_ext.masking import (
    fence_pattern,
    mix_decoder_input,
    relative_position_copy_weights,
    soft_copy,
    source_copy_weight,
    uniform_count_mask,
)


def _rows_masks(lengths, width, left=False):
    m = torch.zeros(len(lengths), width, dtype=torch.bool)
    for b, n in enumerate(lengths):
        if left:
            m[b, width - n:] = True
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

def test_fence_pattern_is_true_at_odd_indices():
    assert fence_pattern(7).tolist() == [i % 2 == 1 for i in range(7)]


def _brute_weight(masked, strategy, w):
    out = torch.zeros(masked.shape)
    for b in range(masked.size(0)):
        for i in range(masked.size(1)):
            if not masked[b, i]:
                continue
            out[b, i] = {"all_mask": 0.0, "all_copied": 1.0, "weighted_sum": 1 - w,
                         "fence_replace": 1.0 if i % 2 == 1 else 0.0}[strategy]
    return out


@pytest.mark.parametrize("strategy", ["all_mask", "all_copied", "weighted_sum", "fence_replace"])
def test_source_copy_weight_matches_definition(strategy):
    g = torch.Generator().manual_seed(3)
    masked = torch.rand(4, 9, generator=g) < 0.5
    assert torch.allclose(source_copy_weight(masked, strategy, 0.6), _brute_weight(masked, strategy, 0.6))


@pytest.mark.parametrize("strategy", ["all_mask", "all_copied", "weighted_sum", "fence_replace"])
def test_mix_puts_m_and_z_where_they_belong(strategy):
    B, T, C = 2, 8, 3
    M = torch.full((B, T, C), 1.0)       # every slot "is" M (masked) or a token embedding
    M[:, ::3] = 7.0                       # some observed-token embeddings
    Z = torch.full((B, T, C), -1.0)
    masked = torch.zeros(B, T, dtype=torch.bool)
    masked[:, 1:6] = True
    masked[1, 6:] = False                 # row 1 padded at the end, never masked
    x = mix_decoder_input(M, Z, masked, strategy, 0.6)
    for b in range(B):
        for i in range(T):
            if not masked[b, i]:
                expected = M[b, i]
            elif strategy == "all_mask" or (strategy == "fence_replace" and i % 2 == 0):
                expected = M[b, i]
            elif strategy == "weighted_sum":
                expected = 0.6 * M[b, i] + 0.4 * Z[b, i]
            else:
                expected = Z[b, i]
            assert torch.allclose(x[b, i], expected), (strategy, b, i)


def test_hybrid_rejects_bad_options():
    masked = torch.ones(1, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match="unknown hybrid strategy"):
        source_copy_weight(masked, "half_copied")
    for w in (-0.1, 1.5):
        with pytest.raises(ValueError, match="mask_weight"):
            source_copy_weight(masked, "weighted_sum", w)

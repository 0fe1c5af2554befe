"""Position masking's corruption functions and the straight-through attention dropout:
rates over many draws, the 80/10/10 and 90/5/5 splits, special tokens and padding never
chosen, draw-for-draw equality with fairseq's MaskTokensDataset, hand-computed gradients."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from fairseq.data import Dictionary, MaskTokensDataset
from fairseq.modules import MultiheadAttention

from fairseq_ext.masking import MASK_POSITION, bert_token_mask, position_mask
from fairseq_ext.modules import (
    StraightThroughDropout,
    StraightThroughDropoutFunction,
    straight_through_dropout,
    use_straight_through_attention_dropout,
)

VOCAB = 50
BOS, PAD, EOS, MASK = 0, 1, 2, 49


def _within(observed: float, expected: float, n: int, sigmas: float = 5.0) -> bool:
    """Is a proportion observed over ``n`` Bernoulli trials within ``sigmas`` standard errors?"""
    se = math.sqrt(expected * (1 - expected) / n)
    return abs(observed - expected) <= sigmas * se + 1e-12


def _sequence(rng, length):
    body = rng.integers(4, MASK, length - 2)
    return np.concatenate([[BOS], body, [EOS]]).astype(np.int64)


def _weights():
    w = np.ones(VOCAB)
    w[:4] = 0
    w[MASK] = 0
    return w / w.sum()


def test_token_mask_rate_split_and_specials():
    rng = np.random.default_rng(0)
    chosen_total = maskable_total = masked = kept = replaced = 0
    for _ in range(3000):
        item = _sequence(rng, int(rng.integers(5, 40)))
        maskable = (item != BOS) & (item != EOS)
        out = bert_token_mask(item, maskable, rng, MASK, replacement_weights=_weights())
        assert not out.chosen[~maskable].any(), "special token chosen"
        assert np.array_equal(out.tokens[~out.chosen], item[~out.chosen])
        chosen_total += out.chosen.sum()
        maskable_total += maskable.sum()
        c = out.chosen
        masked += (out.tokens[c] == MASK).sum()
        kept += (out.tokens[c] == item[c]).sum()
        replaced += ((out.tokens[c] != MASK) & (out.tokens[c] != item[c])).sum()
    assert _within(chosen_total / maskable_total, 0.15, maskable_total)
    # a random replacement equals the original with probability 1/45 (45 ordinary ids)
    assert _within(masked / chosen_total, 0.8, chosen_total)
    assert _within(kept / chosen_total, 0.1 + 0.1 / 45, chosen_total)
    assert _within(replaced / chosen_total, 0.1 * 44 / 45, chosen_total)


def test_token_mask_expected_count_is_exact_with_random_rounding():
    """``int(p * n + u)`` has mean ``p * n`` even when ``p * n`` is not an integer."""
    rng = np.random.default_rng(1)
    maskable = np.ones(7, dtype=bool)
    counts = [
        bert_token_mask(
            np.arange(4, 11), maskable, rng, MASK, replacement_weights=_weights()
        ).chosen.sum()
        for _ in range(20000)
    ]
    assert set(counts) == {1, 2}  # 0.15 * 7 = 1.05
    assert abs(np.mean(counts) - 1.05) < 5 * math.sqrt(0.05 * 0.95 / 20000)


def test_token_mask_is_fairseq_mask_tokens_dataset_draw_for_draw():
    """With every token maskable, the draws are those of fairseq's MaskTokensDataset."""
    d = Dictionary()
    for i in range(40):
        d.add_symbol(f"w{i}", n=i + 1)
    mask_idx = d.add_symbol("<mask>")
    rng = np.random.default_rng(2)
    items = [
        torch.from_numpy(
            np.concatenate([[d.bos()], rng.integers(d.nspecial, mask_idx, n), [d.eos()]])
        )
        for n in rng.integers(3, 60, 200)
    ]
    weights = np.array(d.count, dtype=np.float64)
    weights[: d.nspecial] = 0
    weights /= weights.sum()
    src, tgt = MaskTokensDataset.apply_mask(
        items, d, pad_idx=d.pad(), mask_idx=mask_idx, seed=7, freq_weighted_replacement=True
    )
    src.set_epoch(3)
    tgt.set_epoch(3)
    for index, item in enumerate(items):
        draw = np.random.default_rng(int(hash((7, 3, index)) % 1e6))
        out = bert_token_mask(
            item.numpy(),
            np.ones(len(item), dtype=bool),
            draw,
            mask_idx,
            replacement_weights=weights,
        )
        assert np.array_equal(out.tokens, src[index].numpy()), index
        expected_target = np.where(out.chosen, item.numpy(), d.pad())
        assert np.array_equal(expected_target, tgt[index].numpy()), index


def test_position_mask_rate_split_and_candidates():
    rng = np.random.default_rng(3)
    length = 64
    chosen_total = candidate_total = masked = kept = randomised = 0
    random_values = []
    for _ in range(3000):
        candidates = np.ones(length, dtype=bool)
        candidates[0] = candidates[-1] = False  # <s>, </s>
        candidates[rng.integers(1, length - 1, 5)] = False
        out = position_mask(candidates, rng, prob=0.10)
        assert not out.chosen[~candidates].any(), "non-candidate chosen"
        index = np.arange(length)
        assert np.array_equal(out.positions[~out.chosen], index[~out.chosen])
        c = out.chosen
        chosen_total += c.sum()
        candidate_total += candidates.sum()
        masked += (out.positions[c] == MASK_POSITION).sum()
        kept += (out.positions[c] == index[c]).sum()
        rand = c & (out.positions != MASK_POSITION) & (out.positions != index)
        randomised += rand.sum()
        random_values.extend(out.positions[rand].tolist())
    assert _within(chosen_total / candidate_total, 0.10, candidate_total)
    # a random position equals the true one with probability 1/L
    assert _within(masked / chosen_total, 0.90, chosen_total)
    assert _within(kept / chosen_total, 0.05 + 0.05 / length, chosen_total)
    assert _within(randomised / chosen_total, 0.05 * (1 - 1 / length), chosen_total)
    assert 0 <= min(random_values) and max(random_values) < length
    # uniform over [0, L): each half of the range gets about half of the draws
    low = np.mean(np.array(random_values) < length // 2)
    assert _within(low, 0.5, len(random_values))


def test_position_mask_edges():
    rng = np.random.default_rng(4)
    none = position_mask(np.zeros(10, dtype=bool), rng, prob=1.0)
    assert not none.chosen.any() and np.array_equal(none.positions, np.arange(10))
    every = position_mask(np.ones(10, dtype=bool), rng, prob=1.0, keep_prob=0.0, random_prob=0.0)
    assert every.chosen.all() and (every.positions == MASK_POSITION).all()
    zero = position_mask(np.ones(10, dtype=bool), rng, prob=0.0)
    assert not zero.chosen.any()
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        position_mask(np.ones(3, dtype=bool), rng, prob=1.5)
    with pytest.raises(ValueError, match="<= 1"):
        position_mask(np.ones(3, dtype=bool), rng, keep_prob=0.6, random_prob=0.6)


# ---------------------------------------------------------------- enhanced dropout gradient

X = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
KEEP = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
UPSTREAM = torch.tensor([[0.1, 0.2], [0.3, 0.4]])


def test_straight_through_function_by_hand():
    x = X.clone().requires_grad_(True)
    y = StraightThroughDropoutFunction.apply(x, KEEP / 0.5)  # p = 0.5
    assert torch.equal(y, torch.tensor([[2.0, 0.0], [0.0, 8.0]]))
    y.backward(UPSTREAM)
    assert torch.equal(x.grad, UPSTREAM)  # neither the mask nor 1/(1-p) in the backward pass
    # ordinary dropout, for contrast: the gradient is masked and scaled
    x2 = X.clone().requires_grad_(True)
    (x2 * KEEP / 0.5).backward(UPSTREAM)
    assert torch.equal(x2.grad, torch.tensor([[0.2, 0.0], [0.0, 0.8]]))


def test_straight_through_dropout_draws_like_bernoulli():
    x = torch.arange(1.0, 2001.0).requires_grad_(True)
    g = torch.Generator().manual_seed(5)
    y = straight_through_dropout(x, 0.25, generator=g)
    keep = torch.empty(2000).bernoulli_(0.75, generator=torch.Generator().manual_seed(5))
    assert torch.equal(y, x * (keep / 0.75))
    assert _within(keep.mean().item(), 0.75, 2000)
    y.sum().backward()
    assert torch.equal(x.grad, torch.ones(2000))
    assert straight_through_dropout(x, 0.25, training=False) is x
    assert straight_through_dropout(x, 0.0) is x
    with pytest.raises(ValueError):
        straight_through_dropout(x, 1.0)


def _reference_attention(mha, x, keep, p, straight_through=True):
    """fairseq's self-attention written out, dropping the attention weights with ``keep``;
    straight-through: the dropout counts as the identity in the backward pass."""
    t, b, c = x.shape
    h, d = mha.num_heads, mha.head_dim

    def heads(z):
        return z.contiguous().view(t, b * h, d).transpose(0, 1)

    q = heads(mha.q_proj(x) * mha.scaling)
    k, v = heads(mha.k_proj(x)), heads(mha.v_proj(x))
    probs = F.softmax(torch.bmm(q, k.transpose(1, 2)), dim=-1)
    dropped = probs * keep / (1 - p)
    if straight_through:
        dropped = probs + (dropped - probs).detach()
    out = torch.bmm(dropped, v).transpose(0, 1).contiguous().view(t, b, c)
    return mha.out_proj(out)


def test_multihead_attention_switch_forward_and_backward():
    torch.manual_seed(0)
    p = 0.4
    mha = MultiheadAttention(8, 2, dropout=p, self_attention=True)
    model = torch.nn.ModuleDict({"attn": mha})
    assert use_straight_through_attention_dropout(model) == 1
    assert isinstance(mha.dropout_module, StraightThroughDropout) and mha.dropout_module.p == p
    mha.train()
    x = torch.randn(5, 3, 8)
    torch.manual_seed(11)
    out, _ = mha(x, x, x, need_weights=False)
    out.pow(2).sum().backward()
    got = {n: w.grad.clone() for n, w in mha.named_parameters()}
    mha.zero_grad()
    torch.manual_seed(11)  # the module's only random draw is its dropout mask
    keep = torch.empty(3 * 2, 5, 5).bernoulli_(1 - p)
    ref = _reference_attention(mha, x, keep, p)
    assert torch.allclose(out, ref, atol=1e-6)
    ref.pow(2).sum().backward()
    for n, w in mha.named_parameters():
        assert torch.allclose(got[n], w.grad, atol=1e-5), n
    # ordinary dropout of the same weights gives the same output and another gradient
    mha.zero_grad()
    ordinary = _reference_attention(mha, x, keep, p, straight_through=False)
    assert torch.allclose(ordinary, out, atol=1e-6)
    ordinary.pow(2).sum().backward()
    assert not torch.allclose(mha.q_proj.weight.grad, got["q_proj.weight"], atol=1e-5)

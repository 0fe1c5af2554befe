"""The attention-mask builders against brute-force definitions (nested loops over i, j)."""

import pytest
import torch

from fairseq_ext.masking import check_order, order_ranks, random_order
from fairseq_ext.masking.attention import (
    bidirectional_mask,
    causal_mask,
    permutation_mask,
    prefix_lm_mask,
)


def _padding(lengths, width, left=False):
    p = torch.ones(len(lengths), width, dtype=torch.bool)
    for b, n in enumerate(lengths):
        if left:
            p[b, width - n :] = False
        else:
            p[b, :n] = False
    return p


def _brute(padding, sees):
    """mask[b, i, j] = sees(b, i, j) for real queries; padding queries see only themselves."""
    B, T = padding.shape
    out = torch.zeros(B, T, T, dtype=torch.bool)
    for b in range(B):
        for i in range(T):
            for j in range(T):
                if padding[b, i]:
                    out[b, i, j] = i == j
                else:
                    out[b, i, j] = (not padding[b, j]) and sees(b, i, j)
    return out


@pytest.mark.parametrize("left", [False, True])
def test_bidirectional_and_causal_match_definitions(left):
    pad = _padding([5, 2, 6], 6, left=left)
    assert torch.equal(bidirectional_mask(pad), _brute(pad, lambda b, i, j: True))
    assert torch.equal(causal_mask(pad), _brute(pad, lambda b, i, j: j <= i))


def _segments(src_lens, tgt_lens, left_pad_source=True):
    """``<s> src </s>`` (segment 0, left padded) then ``tgt`` (segment 1, right padded)."""
    S, T = max(src_lens), max(tgt_lens)
    seg = torch.zeros(len(src_lens), S + T, dtype=torch.long)
    pad = torch.zeros(len(src_lens), S + T, dtype=torch.bool)
    for b, (s, t) in enumerate(zip(src_lens, tgt_lens)):
        pad[b, : S - s] = True
        seg[b, S:] = 1
        pad[b, S + t :] = True
    return seg, pad


def test_prefix_mask_matches_definition_with_padding():
    seg, pad = _segments([4, 2, 5], [3, 4, 1])
    ref = _brute(pad, lambda b, i, j: seg[b, j] == 0 or (seg[b, i] == 1 and j <= i))
    assert torch.equal(prefix_lm_mask(seg, pad), ref)


def test_prefix_mask_source_is_bidirectional_and_target_causal():
    seg = torch.tensor([[0, 0, 0, 1, 1]])
    m = prefix_lm_mask(seg, torch.zeros(1, 5, dtype=torch.bool))[0].int().tolist()
    assert m == [
        [1, 1, 1, 0, 0],
        [1, 1, 1, 0, 0],
        [1, 1, 1, 0, 0],
        [1, 1, 1, 1, 0],
        [1, 1, 1, 1, 1],
    ]


def test_prefix_mask_rejects_other_segment_ids():
    with pytest.raises(ValueError, match="0 .source. or 1 .target."):
        prefix_lm_mask(torch.tensor([[0, 2]]), torch.zeros(1, 2, dtype=torch.bool))


def test_every_row_of_a_non_strict_mask_is_non_empty():
    seg, pad = _segments([3, 1], [1, 3])
    for m in (bidirectional_mask(pad), causal_mask(pad), prefix_lm_mask(seg, pad)):
        assert m.any(-1).all()


def _orders():
    return torch.tensor([[0, 3, 1, 4, 2, 5], [0, 2, 1, 3, 4, 5], [0, 1, 2, 3, 4, 5]])


@pytest.mark.parametrize("strict", [False, True])
def test_permutation_mask_matches_definition(strict):
    order = _orders()
    pad = _padding([6, 4, 5], 6)
    rank = {(b, int(p)): k for b in range(3) for k, p in enumerate(order[b])}

    def sees(b, i, j):
        return rank[b, j] < rank[b, i] if strict else rank[b, j] <= rank[b, i]

    ref = _brute(pad, sees)
    if strict:  # padding rows are empty in the query-stream form
        ref &= ~pad.unsqueeze(2)
    assert torch.equal(permutation_mask(order, pad, strict=strict), ref)


def test_permutation_with_identity_order_is_causal():
    pad = _padding([6, 3], 6)
    order = torch.arange(6).expand(2, 6)
    assert torch.equal(permutation_mask(order, pad), causal_mask(pad))


def test_permutation_mask_is_a_shuffled_lower_triangle():
    """Su 2019's observation: permuting rows and columns into the order gives the triangle."""
    order = _orders()[:1]
    m = permutation_mask(order, torch.zeros(1, 6, dtype=torch.bool))[0]
    o = order[0]
    assert torch.equal(m[o][:, o], torch.ones(6, 6, dtype=torch.bool).tril())


def test_order_ranks_invert_the_order():
    order = _orders()
    rank = order_ranks(order)
    for b in range(order.size(0)):
        for k in range(order.size(1)):
            assert rank[b, order[b, k]] == k


@pytest.mark.parametrize(
    "bad, message",
    [
        (torch.tensor([[0, 1, 1, 3]]), "position 1 appears 2 times"),
        (torch.tensor([[0, 1, 2, 4]]), "entry 3 is 4, outside the range"),
        (torch.tensor([[0, -1, 2, 3]]), "outside the range"),
        (torch.tensor([[0.0, 1.0]]), "integer tensor"),
    ],
)
def test_an_order_that_is_not_a_permutation_is_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        check_order(bad)
    if bad.dtype == torch.long:
        with pytest.raises(ValueError, match="not a permutation"):
            permutation_mask(bad, torch.zeros_like(bad, dtype=torch.bool))


def test_random_order_keeps_prefix_and_padding_and_is_uniform():
    pad = _padding([5, 3], 6)
    g = torch.Generator().manual_seed(0)
    counts = torch.zeros(4, 4)  # row 0: which of positions 1..4 comes first among them
    for _ in range(4000):
        order = random_order(pad, keep_first=1, generator=g)
        check_order(order)
        assert (order[:, 0] == 0).all()
        assert order[0, 5] == 5 and order[1, 3:].tolist() == [3, 4, 5]
        assert sorted(order[1, 1:3].tolist()) == [1, 2]
        counts[0, int(order[0, 1]) - 1] += 1
    share = counts[0] / counts[0].sum()
    assert torch.allclose(share, torch.full((4,), 0.25), atol=0.03), share


def test_masks_reject_bad_padding():
    with pytest.raises(ValueError, match="bool"):
        causal_mask(torch.zeros(2, 3))

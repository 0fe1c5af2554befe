"""Dense ``(B, T, T)`` attention masks (rows = queries, True = may attend) from
``masking.predicates`` joined with padding, and the random orders of the permutation LM."""

from __future__ import annotations

import torch
from torch import Tensor

from fairseq_ext.masking import predicates
from fairseq_ext.masking.derived import dense_mask
from fairseq_ext.masking.predicates import MaskMod


def _check_padding(padding: Tensor) -> None:
    if padding.dim() != 2 or padding.dtype != torch.bool:
        raise ValueError(
            f"padding must be a (batch, length) bool tensor, got {tuple(padding.shape)} "
            f"{padding.dtype}"
        )


def padded_dense_mask(rule: MaskMod, padding: Tensor, query_sees_itself: bool = True) -> Tensor:
    """``rule`` joined with ``predicates.padding(padding)`` as a dense ``(B, T, T)`` mask."""
    _check_padding(padding)
    B, T = padding.shape
    allowed = predicates.and_masks(rule, predicates.padding(padding, query_sees_itself))
    return dense_mask(allowed, B, 1, T, T, device=padding.device)[:, 0]


def bidirectional_mask(padding: Tensor) -> Tensor:
    """BERT's encoder: every token sees every non-padding token; ``padding`` is ``(B, T)`` bool."""
    return padded_dense_mask(predicates.bidirectional, padding)


def causal_mask(padding: Tensor) -> Tensor:
    """Left to right: ``i`` sees non-padding ``j <= i``."""
    return padded_dense_mask(predicates.causal, padding)


def check_segment_ids(segment_ids: Tensor, padding: Tensor) -> None:
    """Raise ``ValueError`` unless ``segment_ids`` is 0 or 1 at every non-padding position."""
    if segment_ids.shape != padding.shape:
        raise ValueError(
            f"segment_ids {tuple(segment_ids.shape)} and padding {tuple(padding.shape)} "
            "must have the same shape"
        )
    if ((segment_ids != 0) & (segment_ids != 1) & ~padding).any():
        raise ValueError(
            "segment_ids must be 0 (source) or 1 (target) at every non-padding position"
        )


def prefix_lm_mask(segment_ids: Tensor, padding: Tensor) -> Tensor:
    """UniLM's seq2seq mask (Dong et al. 2019, section 2.3): the source (segment 0) is
    bidirectional, a target token (segment 1) sees the source and its own past."""
    _check_padding(padding)
    check_segment_ids(segment_ids, padding)
    return padded_dense_mask(predicates.prefix_lm(segment_ids), padding)


def check_order(order: Tensor) -> None:
    """Raise ``ValueError`` unless every row of ``order`` is a permutation of ``0..T-1``."""
    if order.dim() != 2 or order.dtype not in (torch.int64, torch.int32):
        raise ValueError(
            f"an order must be a (batch, length) integer tensor, got {tuple(order.shape)} "
            f"{order.dtype}"
        )
    T = order.size(1)
    ok = (order >= 0) & (order < T)
    if not ok.all():
        b, k = (~ok).nonzero()[0].tolist()
        raise ValueError(
            f"order row {b} is not a permutation of 0..{T - 1}: entry {k} is "
            f"{int(order[b, k])}, outside the range"
        )
    counts = torch.zeros(order.size(0), T, dtype=torch.long, device=order.device)
    counts.scatter_add_(1, order.long(), torch.ones_like(order, dtype=torch.long))
    if (counts != 1).any():
        b, p = (counts != 1).nonzero()[0].tolist()
        raise ValueError(
            f"order row {b} is not a permutation of 0..{T - 1}: position {p} appears "
            f"{int(counts[b, p])} times (each position must appear exactly once)"
        )


def order_ranks(order: Tensor) -> Tensor:
    """The inverse permutation: ``rank[b, p]``, the step at which ``p`` comes in ``order[b]``."""
    check_order(order)
    steps = torch.arange(order.size(1), device=order.device).expand_as(order)
    return torch.empty_like(order, dtype=torch.long).scatter_(1, order.long(), steps)


def permutation_mask(order: Tensor, padding: Tensor, strict: bool = False) -> Tensor:
    """XLNet's factorisation-order mask (Yang et al. 2019, section 2.2): ``i`` sees ``j`` iff
    ``rank[j] <= rank[i]`` (``<`` with ``strict``, the query stream, whose rows may be empty)."""
    _check_padding(padding)
    if order.shape != padding.shape:
        raise ValueError(
            f"order {tuple(order.shape)} and padding {tuple(padding.shape)} must have "
            "the same shape"
        )
    return padded_dense_mask(
        predicates.permutation(order_ranks(order), strict), padding, query_sees_itself=not strict
    )


def random_order(
    padding: Tensor, keep_first: int = 1, generator: torch.Generator | None = None
) -> Tensor:
    """A random order per row: the first ``keep_first`` positions stay first, padding last."""
    _check_padding(padding)
    B, T = padding.shape
    scores = torch.rand(B, T, generator=generator, device=padding.device)
    idx = torch.arange(T, device=padding.device, dtype=scores.dtype).expand(B, T)
    # keep_first: scores below 0; random part in [0, 1); padding in [2, 3) by position
    scores = torch.where(idx < keep_first, idx - keep_first, scores)
    scores = torch.where(padding, 2.0 + idx / T, scores)
    return scores.argsort(dim=1)

"""The forms an attention rule of ``masking.predicates`` takes where it runs, each derived from
the rule by evaluating it on index tensors: the dense mask of a full pass and its additive form,
the rows of one cached decoding step, and the picture ``analysis.draw_mask`` draws."""

from __future__ import annotations

from typing import Sequence, Union

import torch
from torch import Tensor

from fairseq_ext.masking.predicates import MaskMod

Indices = Union[int, Sequence[int], Tensor]


def _leading_ones(index: Tensor, rank: int) -> Tensor:
    """``index`` viewed with leading singleton dimensions up to ``2 + rank`` (batch, heads, S)."""
    return index.view((1,) * (2 + rank - index.dim()) + tuple(index.shape))


def _broadcast_shape(a: torch.Size, b: torch.Size) -> tuple:
    """The shape two index tensors broadcast to (the rule's own operations check that they do)."""
    rank = max(len(a), len(b))
    a, b = (1,) * (rank - len(a)) + tuple(a), (1,) * (rank - len(b)) + tuple(b)
    return tuple(max(x, y) for x, y in zip(a, b))


def mask_at(
    mask_mod: MaskMod, q_idx: Tensor, kv_idx: Tensor, batch: int = 1, heads: int = 1
) -> Tensor:
    """``mask_mod`` at every example ``b < batch``, head ``h < heads`` and pair of query and key
    indices: ``q_idx`` and ``kv_idx`` are integer tensors that broadcast to a shape ``S``.

    Returns:
        ``(batch, heads, *S)`` bool, True = may attend (an expanded view over heads the rule
        does not depend on).
    """
    shape = _broadcast_shape(q_idx.shape, kv_idx.shape)
    rank = len(shape)
    b = torch.arange(batch, device=q_idx.device).view((batch,) + (1,) * (1 + rank))
    h = torch.arange(heads, device=q_idx.device).view((1, heads) + (1,) * rank)
    allowed = mask_mod(b, h, _leading_ones(q_idx, rank), _leading_ones(kv_idx, rank))
    return allowed.expand((batch, heads) + shape)


def _indices(rows: Indices, device) -> Tensor:
    if isinstance(rows, int):
        return torch.arange(rows, device=device)
    return torch.as_tensor(rows, dtype=torch.long, device=device)


def dense_mask(mask_mod: MaskMod, B: int, H: int, Q: int, KV: int, device=None) -> Tensor:
    """The full pass: ``mask_mod`` at every query ``< Q`` and key ``< KV``, ``(B, H, Q, KV)``
    bool (as FlexAttention's ``create_mask``)."""
    return mask_at(
        mask_mod, torch.arange(Q, device=device).unsqueeze(1), torch.arange(KV, device=device), B, H
    )


def step_mask(mask_mod: MaskMod, B: int, H: int, rows: Indices, KV: int, device=None) -> Tensor:
    """One cached-decoding step: the query row(s) ``rows`` (an index, a list of them, or a
    tensor) against the ``KV`` keys in the cache, ``(B, H, len(rows), KV)`` bool; row ``r``
    equals row ``rows[r]`` of ``dense_mask`` cut to its first ``KV`` keys."""
    q_idx = torch.as_tensor(rows, dtype=torch.long, device=device).reshape(-1, 1)
    return mask_at(mask_mod, q_idx, torch.arange(KV, device=q_idx.device), B, H)


def mask_picture(mask_mod: MaskMod, rows: Indices, keys: Indices) -> Tensor:
    """The ``(rows, keys)`` bool matrix ``analysis.draw_mask`` draws: example 0, head 0, query
    rows ``rows`` against keys ``keys`` (a count ``n`` means ``0 .. n - 1``)."""
    q_idx, kv_idx = _indices(rows, None), _indices(keys, None)
    return mask_at(mask_mod, q_idx.unsqueeze(1), kv_idx)[0, 0]


def additive_attention_mask(allowed: Tensor, dtype: torch.dtype) -> Tensor:
    """``0`` where ``allowed`` is True and ``torch.finfo(dtype).min`` elsewhere (finite, so
    fp16/bf16 scores stay finite; a row must keep at least one allowed key)."""
    zero = torch.zeros((), dtype=dtype, device=allowed.device)
    low = torch.full((), torch.finfo(dtype).min, dtype=dtype, device=allowed.device)
    return torch.where(allowed, zero, low)

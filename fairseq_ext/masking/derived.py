"""The forms a ``masking.predicates`` rule takes where it runs: the dense mask, its additive
form, the rows of one cached step and the picture ``analysis.draw_mask`` draws."""

from __future__ import annotations

from typing import Sequence, Union

import torch
from torch import Tensor

from fairseq_ext.masking.predicates import MaskMod

Indices = Union[int, Sequence[int], Tensor]


def _leading_ones(index: Tensor, rank: int) -> Tensor:
    return index.view((1,) * (2 + rank - index.dim()) + tuple(index.shape))


def mask_at(
    mask_mod: MaskMod, q_idx: Tensor, kv_idx: Tensor, batch: int = 1, heads: int = 1
) -> Tensor:
    """``mask_mod`` at every example, head and broadcast index pair: ``(batch, heads, *S)``."""
    shape = tuple(torch.broadcast_shapes(q_idx.shape, kv_idx.shape))
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
    """``(B, H, Q, KV)`` bool, as FlexAttention's ``create_mask``."""
    return mask_at(
        mask_mod, torch.arange(Q, device=device).unsqueeze(1), torch.arange(KV, device=device), B, H
    )


def step_mask(mask_mod: MaskMod, B: int, H: int, rows: Indices, KV: int, device=None) -> Tensor:
    """Rows ``rows`` of ``dense_mask`` against the ``KV`` cached keys (one decoding step)."""
    q_idx = torch.as_tensor(rows, dtype=torch.long, device=device).reshape(-1, 1)
    return mask_at(mask_mod, q_idx, torch.arange(KV, device=q_idx.device), B, H)


def mask_picture(mask_mod: MaskMod, rows: Indices, keys: Indices) -> Tensor:
    """The ``(rows, keys)`` matrix of example 0, head 0 (a count ``n`` means ``0 .. n - 1``)."""
    q_idx, kv_idx = _indices(rows, None), _indices(keys, None)
    return mask_at(mask_mod, q_idx.unsqueeze(1), kv_idx)[0, 0]


def additive_attention_mask(allowed: Tensor, dtype: torch.dtype) -> Tensor:
    """0 where allowed, ``finfo(dtype).min`` elsewhere (finite in fp16/bf16)."""
    zero = torch.zeros((), dtype=dtype, device=allowed.device)
    low = torch.full((), torch.finfo(dtype).min, dtype=dtype, device=allowed.device)
    return torch.where(allowed, zero, low)

"""Soft copy of the source embeddings by relative position (Wang et al. 2021, eq. 8-10)."""

from __future__ import annotations

import torch
from torch import Tensor


def _relative_index(mask: Tensor) -> tuple[Tensor, Tensor]:
    index = mask.long().cumsum(dim=1) - 1
    length = mask.sum(dim=1, keepdim=True)
    return index, length


def relative_position_copy_weights(
    tgt_mask: Tensor, src_mask: Tensor, temperature: float
) -> Tensor:
    """``alpha_ij = softmax_j(-|i / L_Y - j / L_X| / tau)`` (eq. 8-9) over non-pad positions:
    ``(B, T, S)``."""
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    i, len_y = _relative_index(tgt_mask)
    j, len_x = _relative_index(src_mask)
    pos_y = i.float() / len_y.clamp(min=1).float()
    pos_x = j.float() / len_x.clamp(min=1).float()
    distance = -(pos_y.unsqueeze(2) - pos_x.unsqueeze(1)).abs()
    logits = distance / temperature
    logits = logits.masked_fill(~src_mask.unsqueeze(1), torch.finfo(logits.dtype).min)
    return torch.softmax(logits, dim=-1)


def soft_copy(
    src_embeddings: Tensor, src_mask: Tensor, tgt_mask: Tensor, temperature: float
) -> Tensor:
    """``z_i = sum_j alpha_ij e_j`` (eq. 10): ``(B, T, C)``."""
    weights = relative_position_copy_weights(tgt_mask, src_mask, temperature)
    return torch.bmm(weights.to(src_embeddings.dtype), src_embeddings)

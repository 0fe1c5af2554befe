"""Soft copy of the source embedding by relative position (HI-CMLM paper, eq. 8-10)."""

from __future__ import annotations

import torch
from torch import Tensor


def _relative_index(mask: Tensor) -> tuple[Tensor, Tensor]:
    """Index of every non-pad position among the non-pad positions of its row, and the
    row's non-pad length. Works for left and right padding alike."""
    index = mask.long().cumsum(dim=1) - 1
    length = mask.sum(dim=1, keepdim=True)
    return index, length


def relative_position_copy_weights(
    tgt_mask: Tensor, src_mask: Tensor, temperature: float
) -> Tensor:
    """alpha_ij = softmax_j(d_ij / tau) with d_ij = -|i / L_Y - j / L_X| (eq. 8-9).

    ``i`` and ``j`` are 0-based indices over the non-pad tokens of the target and source
    rows (special tokens included, as in fairseq's tensors); ``L_Y`` and ``L_X`` are the
    non-pad lengths. Padded source columns get weight 0; padded target rows get the
    weights of a valid row (they are ignored downstream).

    Args:
        tgt_mask: ``(B, T)`` bool, True at non-pad target positions.
        src_mask: ``(B, S)`` bool, True at non-pad source positions.
        temperature: tau > 0 (the paper uses 0.2).

    Returns:
        ``(B, T, S)`` float weights, each row summing to 1 over the source.
    """
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
    """z_i = sum_j alpha_ij e_j (eq. 10): the copied source embedding for each target slot.

    Args:
        src_embeddings: ``(B, S, C)`` source token embeddings ``e_j``.
        src_mask: ``(B, S)`` bool, True at non-pad source positions.
        tgt_mask: ``(B, T)`` bool, True at non-pad target positions.
        temperature: tau > 0.

    Returns:
        ``(B, T, C)`` copied embeddings ``Z`` in the dtype of ``src_embeddings``.
    """
    weights = relative_position_copy_weights(tgt_mask, src_mask, temperature)
    return torch.bmm(weights.to(src_embeddings.dtype), src_embeddings)

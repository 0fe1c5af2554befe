"""What a masked decoder slot is given: [MASK] (M), the copied source (Z), or a mix
(HI-CMLM paper, section 3.2)."""
from __future__ import annotations

import torch
from torch import Tensor

HYBRID_STRATEGIES = ("all_mask", "all_copied", "weighted_sum", "fence_replace")


def fence_pattern(length: int, device=None) -> Tensor:
    """The fence (0, 1, 0, 1, ...) of length ``length``: True at odd indices.

    Indices are 0-based positions of fairseq's decoder input, whose index 0 holds <s>.
    So the first target word (index 1) is on a fence post: an odd 0-based tensor index is
    an odd 1-based word position, and "odd positions take Z" reads the same in both
    conventions. <s> (index 0) is never masked, so it never takes Z.
    """
    return torch.arange(length, device=device) % 2 == 1


def source_copy_weight(masked: Tensor, strategy: str, mask_weight: float = 0.6) -> Tensor:
    """Weight of Z in each decoder-input slot; M gets ``1 - weight`` at masked slots.

    * ``all_mask``: 0 everywhere (plain CMLM);
    * ``all_copied``: 1 at masked slots;
    * ``weighted_sum``: ``1 - mask_weight`` at masked slots (the paper's best is 0.6 M + 0.4 Z);
    * ``fence_replace``: 1 at masked slots with an odd index (``fence_pattern``), 0 elsewhere.

    Unmasked slots always get 0: observed tokens keep their own embedding.

    Args:
        masked: ``(B, T)`` bool, True at masked slots.
        strategy: one of ``HYBRID_STRATEGIES``.
        mask_weight: weight of M for ``weighted_sum``, in [0, 1].

    Returns:
        ``(B, T)`` float weights in [0, 1].
    """
    if strategy not in HYBRID_STRATEGIES:
        raise ValueError(f"unknown hybrid strategy {strategy!r}; choose one of {HYBRID_STRATEGIES}")
    if not 0.0 <= mask_weight <= 1.0:
        raise ValueError(f"mask_weight must be in [0, 1], got {mask_weight}")
    m = masked.float()
    if strategy == "all_mask":
        return m * 0.0
    if strategy == "all_copied":
        return m
    if strategy == "weighted_sum":
        return m * (1.0 - mask_weight)
    return m * fence_pattern(masked.size(1), device=masked.device).float().unsqueeze(0)


def mix_decoder_input(mask_embeddings: Tensor, copied: Tensor, masked: Tensor, strategy: str,
                      mask_weight: float = 0.6) -> Tensor:
    """The hybrid decoder input: ``(1 - w) * X + w * Z`` with ``w = source_copy_weight(...)``.

    Args:
        mask_embeddings: ``(B, T, C)`` embeddings of the decoder input tokens (M at masked slots).
        copied: ``(B, T, C)`` copied source embeddings Z (``soft_copy``).
        masked: ``(B, T)`` bool, True at masked slots.
        strategy, mask_weight: see ``source_copy_weight``.

    Returns:
        ``(B, T, C)`` mixed embeddings; slots with ``w = 0`` (all unmasked ones) equal
        ``mask_embeddings`` exactly and slots with ``w = 1`` equal ``copied`` exactly
        (``torch.lerp``).
    """
    w = source_copy_weight(masked, strategy, mask_weight).to(mask_embeddings.dtype).unsqueeze(-1)
    return torch.lerp(mask_embeddings, copied.to(mask_embeddings.dtype), w)

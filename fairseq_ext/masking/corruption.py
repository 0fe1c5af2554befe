"""Token corruption: which target tokens a model has to recover."""
from __future__ import annotations

import torch
from torch import Tensor


def uniform_count_mask(maskable: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """CMLM training noise (Ghazvininejad et al. 2019; HI-CMLM paper, section 2.3).

    For each row with ``n`` maskable positions, draw the number of masked tokens ``k``
    uniformly from ``{1, ..., n}``, then choose ``k`` of the ``n`` positions uniformly
    without replacement. Positions where ``maskable`` is False (padding, <s>, </s>) are
    never chosen; a row with no maskable position gets no mask.

    Args:
        maskable: ``(B, T)`` bool, True where a token may be masked.
        generator: optional RNG for reproducibility.

    Returns:
        ``(B, T)`` bool, True at the masked positions.
    """
    if maskable.dim() != 2 or maskable.dtype != torch.bool:
        raise ValueError("maskable must be a (batch, length) bool tensor")
    n = maskable.sum(dim=1)
    u = torch.rand(n.shape, generator=generator, device=maskable.device)
    k = (n.to(u.dtype) * u).long() + 1
    k = torch.minimum(k, n)
    # Random scores for the maskable positions; the others sort last.
    scores = torch.rand(maskable.shape, generator=generator, device=maskable.device)
    scores = scores.masked_fill(~maskable, 2.0)
    rank = scores.argsort(dim=1).argsort(dim=1)
    return rank < k.unsqueeze(1)

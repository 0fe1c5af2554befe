"""MASS-style span masking, ProphetNet's denoising pre-training (Qi et al. 2020, section 2.4
and 3.1; Song et al. 2019): in every block of 64 tokens one contiguous span of 15% of the
block is masked in the encoder input, and the decoder recovers the span."""
from __future__ import annotations

from typing import Union

import numpy as np
import torch
from torch import Tensor

Rng = Union[np.random.RandomState, torch.Generator, None]


def _randint(rng: Rng, low: int, high: int) -> int:
    """One integer uniform in ``[low, high)``."""
    if isinstance(rng, np.random.RandomState):
        return int(rng.randint(low, high))
    return int(torch.randint(low, high, (1,), generator=rng).item())


def _uniform(rng: Rng, n: int) -> Tensor:
    if isinstance(rng, np.random.RandomState):
        return torch.from_numpy(rng.random_sample(n))
    return torch.rand(n, generator=rng, dtype=torch.float64)


def block_span_mask(maskable: Tensor, block_size: int = 64, ratio: float = 0.15, rng: Rng = None) -> Tensor:
    """One contiguous span per block of maskable tokens.

    Rule: the maskable positions (in order) are cut into blocks of ``block_size``; a block of
    ``m`` maskable positions gets one span of ``max(1, round(ratio * m))`` consecutive
    maskable positions, its start uniform among the ``m - span + 1`` possible starts.
    Non-maskable positions (padding, ``</s>``, other special symbols) are never chosen and do
    not count towards a block.

    Args:
        maskable: ``(T,)`` bool, True where a token may be masked.
        block_size: tokens per block (64 in the paper).
        ratio: share of each block that is masked (0.15 in the paper), in (0, 1].
        rng: ``numpy.random.RandomState`` or ``torch.Generator`` (None: torch's global RNG).

    Returns:
        ``(T,)`` bool, True at the chosen positions.
    """
    if maskable.dim() != 1 or maskable.dtype != torch.bool:
        raise ValueError("maskable must be a 1-D bool tensor")
    if block_size < 1 or not 0.0 < ratio <= 1.0:
        raise ValueError(f"need block_size >= 1 and 0 < ratio <= 1, got {block_size}, {ratio}")
    where = maskable.nonzero().squeeze(1)
    chosen = torch.zeros_like(maskable)
    for start in range(0, len(where), block_size):
        block = where[start:start + block_size]
        span = max(1, int(round(ratio * len(block))))
        first = _randint(rng, 0, len(block) - span + 1)
        chosen[block[first:first + span]] = True
    return chosen


def replace_80_10_10(tokens: Tensor, chosen: Tensor, mask_idx: int, random_low: int, random_high: int,
                     rng: Rng = None, probs: tuple[float, float, float] = (0.8, 0.1, 0.1)) -> tuple[Tensor, Tensor]:
    """BERT's replacement of the chosen tokens: each one independently becomes ``mask_idx``
    with probability 0.8, a token uniform in ``[random_low, random_high)`` with 0.1, and
    stays unchanged with 0.1 (``probs``). Unchosen tokens are never changed.

    Returns:
        ``(corrupted tokens, kind)``: ``kind`` is ``(T,)`` long, 0 = not chosen, 1 = masked,
        2 = random token, 3 = kept.
    """
    if abs(sum(probs) - 1.0) > 1e-6 or min(probs) < 0:
        raise ValueError(f"probs must be three non-negative numbers summing to 1, got {probs}")
    if random_high <= random_low:
        raise ValueError(f"empty random-token range [{random_low}, {random_high})")
    idx = chosen.nonzero().squeeze(1)
    u = _uniform(rng, len(idx))
    kind = torch.zeros(tokens.shape, dtype=torch.long)
    kind_chosen = torch.full((len(idx),), 3, dtype=torch.long)
    kind_chosen[u < probs[0] + probs[1]] = 2
    kind_chosen[u < probs[0]] = 1
    kind[idx] = kind_chosen
    out = tokens.clone()
    out[idx[kind_chosen == 1]] = mask_idx
    n_random = int((kind_chosen == 2).sum())
    if n_random:
        if isinstance(rng, np.random.RandomState):
            random_tokens = torch.from_numpy(rng.randint(random_low, random_high, n_random)).to(tokens.dtype)
        else:
            random_tokens = torch.randint(random_low, random_high, (n_random,), generator=rng, dtype=tokens.dtype)
        out[idx[kind_chosen == 2]] = random_tokens
    return out, kind

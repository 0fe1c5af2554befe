"""Which tokens are corrupted (a share per example, or CMLM's uniform count, Ghazvininejad
et al. 2019, section 3) and what they become (BERT's 80/10/10, Devlin et al. 2019, section 3.1)."""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np
import torch
from torch import Tensor

# ``Replaced.kind`` of each position.
NOT_CHOSEN, MASKED, RANDOM, KEPT = 0, 1, 2, 3


class Replaced(NamedTuple):
    values: np.ndarray  # the corrupted values
    kind: np.ndarray  # int64 per position: NOT_CHOSEN, MASKED, RANDOM or KEPT


def check_example_rng(rng) -> None:
    """A per-example rule draws from a ``numpy.random.Generator``; say so if given another."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(
            f"rng must be a numpy.random.Generator (masking.example_rng), got {type(rng).__name__}"
        )


def example_rng(seed: int, epoch: int, index: int) -> np.random.Generator:
    """One example's generator in one epoch, seeded as fairseq's ``MaskTokensDataset``."""
    return np.random.default_rng(int(hash((seed, epoch, index)) % 1e6))


def choose_share(candidates: np.ndarray, prob: float, rng: np.random.Generator) -> np.ndarray:
    """``int(prob * n + u)`` of the ``n`` candidates, as fairseq's ``MaskTokensDataset`` draws."""
    if not 0.0 <= prob <= 1.0:
        raise ValueError(f"the share to choose must be in [0, 1], got {prob}")
    check_example_rng(rng)
    where = np.flatnonzero(candidates)
    count = int(prob * len(where) + rng.random())
    chosen = np.zeros(len(candidates), dtype=bool)
    chosen[where[rng.choice(len(where), count, replace=False)]] = True
    return chosen


def check_replacement_shares(keep_prob: float, random_prob: float) -> None:
    """The kept and random shares of ``replace_80_10_10``: each in [0, 1], together <= 1."""
    for name, p in (("keep_prob", keep_prob), ("random_prob", random_prob)):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {p}")
    if keep_prob + random_prob > 1.0:
        raise ValueError(
            f"the kept and random shares must sum to <= 1, got {keep_prob} + {random_prob}"
        )


def replace_80_10_10(
    values: np.ndarray,
    chosen: np.ndarray,
    rng: np.random.Generator,
    mask_value: int,
    keep_prob: float = 0.1,
    random_prob: float = 0.1,
    replacement_weights: Optional[np.ndarray] = None,
) -> Replaced:
    """BERT's replacement (Devlin et al. 2019, section 3.1): a chosen position becomes
    ``mask_value``, keeps its value (``keep_prob``) or is drawn from ``replacement_weights``
    (``random_prob``), in fairseq's ``MaskTokensDataset`` draw order."""
    check_replacement_shares(keep_prob, random_prob)
    if random_prob > 0 and replacement_weights is None:
        raise ValueError("random_prob > 0 needs replacement_weights")
    check_example_rng(rng)
    size = len(values)
    either = keep_prob + random_prob
    kind = np.where(chosen, MASKED, NOT_CHOSEN)
    if either > 0.0:
        kept_or_random = chosen & (rng.random(size) < either)
        if random_prob == 0.0:
            kind[kept_or_random] = KEPT
        elif keep_prob == 0.0:
            kind[kept_or_random] = RANDOM
        else:
            keep = rng.random(size) < keep_prob / either
            kind[kept_or_random & keep] = KEPT
            kind[kept_or_random & ~keep] = RANDOM
    out = np.copy(values)
    out[kind == MASKED] = mask_value
    num_random = int((kind == RANDOM).sum())
    if num_random:
        out[kind == RANDOM] = rng.choice(
            len(replacement_weights), num_random, p=replacement_weights
        )
    return Replaced(out, kind)


def uniform_count_mask(maskable: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """CMLM noise (Ghazvininejad et al. 2019, section 3): per row, ``k ~ U{1..n}`` of the ``n``
    maskable positions, chosen uniformly; ``(B, T)`` bool in and out."""
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

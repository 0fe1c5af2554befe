"""Token corruption: which tokens a model has to recover (a share per example, or CMLM's uniform
count per batch, Ghazvininejad et al. 2019, section 3) and what a chosen token becomes (BERT's
80/10/10, Devlin et al. 2019, section 3.1)."""

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
    """The generator of one example in one epoch: fairseq's ``MaskTokensDataset`` scheme,
    ``default_rng(int(hash((seed, epoch, index)) % 1e6))``.

    Reproducible, new each epoch, and independent of the batch order, the data-loader
    worker and the distributed rank (Python hashes a tuple of ints the same in every process).
    Like fairseq's, it has 10^6 distinct streams; keeping the scheme keeps BERT's token
    masking equal to fairseq's ``masked_lm`` draw for draw.
    """
    return np.random.default_rng(int(hash((seed, epoch, index)) % 1e6))


def choose_share(candidates: np.ndarray, prob: float, rng: np.random.Generator) -> np.ndarray:
    """BERT's choice of the corrupted tokens, counted as fairseq's ``MaskTokensDataset``
    counts them: ``int(prob * n + u)`` of the ``n`` candidates (``u ~ U[0, 1)``: rounding at
    random, so the expected count is exactly ``prob * n``), uniformly without replacement.

    Args:
        candidates: ``(L,)`` bool, True where a position may be chosen.
        prob: share to choose, in [0, 1].
        rng: the example's generator.

    Returns:
        ``(L,)`` bool, True at the chosen positions.
    """
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
    """BERT's replacement of the chosen positions (Devlin et al. 2019, section 3.1): each one
    independently becomes ``mask_value`` (80%), keeps its value (``keep_prob``, 10%) or
    becomes a value drawn from ``replacement_weights`` (``random_prob``, 10%). Unchosen
    positions never change.

    The draws are those of fairseq's ``MaskTokensDataset`` in the same order: ``u < keep_prob
    + random_prob`` over all positions picks the kept-or-random ones, a second ``u`` (drawn
    only when both shares are positive) splits them, then one ``rng.choice`` per random value.

    Args:
        values: ``(L,)`` int values (token ids, position indices).
        chosen: ``(L,)`` bool, True at the positions to corrupt.
        rng: the example's generator.
        mask_value: what a masked position becomes (``<mask>``, ``MASK_POSITION``).
        replacement_weights: ``(V,)`` probabilities of the random values ``0 .. V-1``;
            required when ``random_prob > 0``.

    Returns:
        ``Replaced(values, kind)``.
    """
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

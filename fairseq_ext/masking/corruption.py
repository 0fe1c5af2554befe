"""Which tokens are corrupted (a share per example, CMLM's uniform count, Ghazvininejad et al.
2019, section 3; MASS-style spans, Song et al. 2019, ProphetNet's pre-training noise, Qi et al.
2020, section 2.4) and what they become (BERT's 80/10/10, Devlin et al. 2019, section 3.1), on
token ids and on positions (position masking, Wagner et al. 2020, section 2.1)."""

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


# Input-position code of a token whose position embedding is replaced by the learned
# mask-position embedding.
MASK_POSITION = -1


class TokenMask(NamedTuple):
    tokens: np.ndarray  # the corrupted input ids
    chosen: np.ndarray  # bool, True at the tokens the MLM loss covers


class PositionMask(NamedTuple):
    positions: np.ndarray  # int64 input position index of each token, MASK_POSITION where masked
    chosen: np.ndarray  # bool, True at the tokens whose original index the classifier predicts


def bert_token_mask(
    tokens: np.ndarray,
    maskable: np.ndarray,
    rng: np.random.Generator,
    mask_idx: int,
    mask_prob: float = 0.15,
    leave_unmasked_prob: float = 0.1,
    random_token_prob: float = 0.1,
    replacement_weights: Optional[np.ndarray] = None,
) -> TokenMask:
    """BERT's token corruption (Devlin et al. 2019, section 3.1), equal to fairseq's
    ``masked_lm`` noise draw for draw when every token is maskable."""
    check_replacement_shares(leave_unmasked_prob, random_token_prob)
    chosen = choose_share(maskable, mask_prob, rng)
    replaced = replace_80_10_10(
        tokens,
        chosen,
        rng,
        mask_idx,
        keep_prob=leave_unmasked_prob,
        random_prob=random_token_prob,
        replacement_weights=replacement_weights,
    )
    return TokenMask(replaced.values, chosen)


def position_mask(
    candidates: np.ndarray,
    rng: np.random.Generator,
    prob: float = 0.10,
    keep_prob: float = 0.05,
    random_prob: float = 0.05,
) -> PositionMask:
    """Position masking (Wagner et al. 2020, section 2.1): BERT's rule over the indices
    ``0 .. L-1``, a masked one becoming ``MASK_POSITION``; the labels are the original indices."""
    check_replacement_shares(keep_prob, random_prob)
    size = len(candidates)
    positions = np.arange(size, dtype=np.int64)
    chosen = choose_share(candidates, prob, rng)
    if not chosen.any():
        return PositionMask(positions, chosen)
    replaced = replace_80_10_10(
        positions,
        chosen,
        rng,
        MASK_POSITION,
        keep_prob=keep_prob,
        random_prob=random_prob,
        replacement_weights=np.full(size, 1.0 / size),
    )
    return PositionMask(replaced.values, chosen)


def _check_blocks(block_size: int, ratio: float) -> None:
    if block_size < 1 or not 0.0 < ratio <= 1.0:
        raise ValueError(f"need block_size >= 1 and 0 < ratio <= 1, got {block_size}, {ratio}")


def block_span_length(block_tokens, ratio: float = 0.15) -> np.ndarray:
    """``max(1, round(ratio * m))`` tokens for a block of ``m > 0``, else 0."""
    m = np.asarray(block_tokens, dtype=np.int64)
    return np.where(m > 0, np.maximum(1, np.round(ratio * m)), 0).astype(np.int64)


def span_lengths(num_tokens, block_size: int = 64, ratio: float = 0.15) -> np.ndarray:
    """How many tokens ``block_span_mask`` chooses in lines of ``num_tokens``."""
    _check_blocks(block_size, ratio)
    n = np.asarray(num_tokens, dtype=np.int64)
    return n // block_size * block_span_length(block_size, ratio) + block_span_length(
        n % block_size, ratio
    )


def block_span_mask(
    maskable: np.ndarray, rng: np.random.Generator, block_size: int = 64, ratio: float = 0.15
) -> np.ndarray:
    """One span per block of ``block_size`` maskable positions, its start uniform; ``(T,)`` bool."""
    maskable = np.asarray(maskable)
    if maskable.ndim != 1 or maskable.dtype != bool:
        raise ValueError("maskable must be a 1-D bool array")
    check_example_rng(rng)
    _check_blocks(block_size, ratio)
    where = np.flatnonzero(maskable)
    chosen = np.zeros(len(maskable), dtype=bool)
    for start in range(0, len(where), block_size):
        block = where[start : start + block_size]
        span = int(block_span_length(len(block), ratio))
        first = int(rng.integers(0, len(block) - span + 1))
        chosen[block[first : first + span]] = True
    return chosen

"""Token masking and position masking for one sequence (Wagner et al. 2020, "Positional
Masking for Language Models", sections 2.1 and 3).

Both corruptions are drawn in the data pipeline, one ``np.random.Generator`` per example
(fairseq seeds it from ``(seed, epoch, index)``), so they are numpy functions over one 1-D
sequence. A token is *maskable* when the caller says so: the task passes every position
that is not ``<s>``, ``</s>`` or padding, and these are never chosen.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

# Input-position code of a token whose position embedding is replaced by the learned
# mask-position embedding.
MASK_POSITION = -1


class TokenMask(NamedTuple):
    tokens: np.ndarray  # the corrupted input ids
    chosen: np.ndarray  # bool, True at the tokens the MLM loss covers


class PositionMask(NamedTuple):
    positions: np.ndarray  # int64 input position index of each token, MASK_POSITION where masked
    chosen: np.ndarray  # bool, True at the tokens whose original index the classifier predicts


def _check_probs(**probs: float) -> None:
    for name, p in probs.items():
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {p}")


def _choose(candidates: np.ndarray, prob: float, rng: np.random.Generator) -> np.ndarray:
    """``int(prob * n + u)`` of the ``n`` candidate indices (u ~ U[0, 1): rounding at random,
    so the expected count is ``prob * n``), uniformly without replacement."""
    count = int(prob * len(candidates) + rng.random())
    return candidates[rng.choice(len(candidates), count, replace=False)]


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
    """BERT's token corruption (Devlin et al. 2019, section 3.1; the paper, section 3).

    Rule: ``int(mask_prob * n + u)`` of the ``n`` maskable tokens are chosen uniformly; a
    chosen token becomes ``mask_idx`` (80%), stays as it is (``leave_unmasked_prob``, 10%)
    or becomes a token drawn from ``replacement_weights`` (``random_token_prob``, 10%).

    The draws are those of fairseq's ``MaskTokensDataset`` in the same order, so with every
    token maskable the result equals fairseq's ``masked_lm`` noise draw for draw.

    Args:
        tokens: ``(L,)`` int token ids.
        maskable: ``(L,)`` bool, True where a token may be chosen.
        rng: the example's generator.
        mask_idx: id of ``<mask>``.
        replacement_weights: ``(V,)`` probabilities of the random replacement tokens
            (zero for special tokens); required when ``random_token_prob > 0``.

    Returns:
        ``TokenMask(tokens, chosen)``.
    """
    _check_probs(mask_prob=mask_prob, leave_unmasked_prob=leave_unmasked_prob,
                 random_token_prob=random_token_prob)
    if leave_unmasked_prob + random_token_prob > 1.0:
        raise ValueError("leave_unmasked_prob + random_token_prob must be <= 1")
    if random_token_prob > 0 and replacement_weights is None:
        raise ValueError("random_token_prob > 0 needs replacement_weights")
    size = len(tokens)
    chosen = np.zeros(size, dtype=bool)
    chosen[_choose(np.flatnonzero(maskable), mask_prob, rng)] = True

    unmask = rand = None
    rand_or_unmask_prob = random_token_prob + leave_unmasked_prob
    if rand_or_unmask_prob > 0.0:
        rand_or_unmask = chosen & (rng.random(size) < rand_or_unmask_prob)
        if random_token_prob == 0.0:
            unmask = rand_or_unmask
        elif leave_unmasked_prob == 0.0:
            rand = rand_or_unmask
        else:
            decision = rng.random(size) < leave_unmasked_prob / rand_or_unmask_prob
            unmask = rand_or_unmask & decision
            rand = rand_or_unmask & ~decision

    to_mask = chosen ^ unmask if unmask is not None else chosen
    out = np.copy(tokens)
    out[to_mask] = mask_idx
    if rand is not None:
        num_rand = int(rand.sum())
        if num_rand > 0:
            out[rand] = rng.choice(len(replacement_weights), num_rand, p=replacement_weights)
    return TokenMask(out, chosen)


def position_mask(
    candidates: np.ndarray,
    rng: np.random.Generator,
    prob: float = 0.10,
    keep_prob: float = 0.05,
    random_prob: float = 0.05,
) -> PositionMask:
    """Position masking (the paper, section 2.1 and section 3: "the same masking strategy
    for position as BERT used for token ids").

    Rule: ``int(prob * n + u)`` of the ``n`` candidate tokens are chosen uniformly; a chosen
    token's input position becomes ``MASK_POSITION`` (90%), stays its own index
    (``keep_prob``, 5%) or becomes an index drawn uniformly from ``[0, L)`` (``random_prob``,
    5%); the classifier predicts the original index of every chosen token.

    Args:
        candidates: ``(L,)`` bool, True where a token's position may be masked.
        rng: the example's generator.

    Returns:
        ``PositionMask(positions, chosen)``: ``positions`` is ``arange(L)`` with the changes
        above; the labels of the chosen tokens are their indices.
    """
    _check_probs(prob=prob, keep_prob=keep_prob, random_prob=random_prob)
    if keep_prob + random_prob > 1.0:
        raise ValueError("keep_prob + random_prob must be <= 1")
    size = len(candidates)
    positions = np.arange(size, dtype=np.int64)
    chosen = np.zeros(size, dtype=bool)
    picked = _choose(np.flatnonzero(candidates), prob, rng)
    chosen[picked] = True
    if len(picked):
        u = rng.random(len(picked))
        random_rows = picked[(u >= keep_prob) & (u < keep_prob + random_prob)]
        positions[picked[u >= keep_prob + random_prob]] = MASK_POSITION
        positions[random_rows] = rng.integers(0, size, len(random_rows))
    return PositionMask(positions, chosen)

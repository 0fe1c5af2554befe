"""Token masking and position masking of one sequence (Wagner et al. 2020, section 2.1): BERT's
rule applied to token ids (80/10/10) and to positions (90% mask-position embedding, 5% kept, 5%
random), drawn with the example's numpy generator; ``<s>``, ``</s>`` and padding are never chosen."""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from fairseq_ext.masking.corruption import check_replacement_shares, choose_share, replace_80_10_10

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
    """BERT's token corruption (Devlin et al. 2019, section 3.1; the paper, section 3).

    Rule: ``choose_share`` picks ``int(mask_prob * n + u)`` of the ``n`` maskable tokens;
    ``replace_80_10_10`` turns a chosen token into ``mask_idx`` (80%), leaves it
    (``leave_unmasked_prob``, 10%) or draws it from ``replacement_weights``
    (``random_token_prob``, 10%).

    Both draw as fairseq's ``MaskTokensDataset`` does, in the same order, so with every token
    maskable the result equals fairseq's ``masked_lm`` noise draw for draw.

    Args:
        tokens: ``(L,)`` int token ids.
        maskable: ``(L,)`` bool, True where a token may be chosen.
        rng: the example's generator (``example_rng``).
        mask_idx: id of ``<mask>``.
        replacement_weights: ``(V,)`` probabilities of the random replacement tokens
            (zero for special tokens); required when ``random_token_prob > 0``.

    Returns:
        ``TokenMask(tokens, chosen)``.
    """
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
    """Position masking (the paper, section 2.1 and section 3: "the same masking strategy
    for position as BERT used for token ids").

    Rule: BERT's rule over the position indices ``0 .. L-1``: ``choose_share`` picks
    ``int(prob * n + u)`` of the ``n`` candidate tokens; ``replace_80_10_10`` turns a chosen
    token's input position into ``MASK_POSITION`` (90%), leaves it (``keep_prob``, 5%) or
    draws it uniformly from ``[0, L)`` (``random_prob``, 5%); the classifier predicts the
    original index of every chosen token.

    Args:
        candidates: ``(L,)`` bool, True where a token's position may be masked.
        rng: the example's generator (``example_rng``).

    Returns:
        ``PositionMask(positions, chosen)``: ``positions`` is ``arange(L)`` with the changes
        above; the labels of the chosen tokens are their indices.
    """
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

"""Token and position masking of one sequence (Wagner et al. 2020, section 2.1): BERT's rule on
token ids (80/10/10) and on positions (90/5/5); ``<s>``, ``</s>`` and padding never chosen."""

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

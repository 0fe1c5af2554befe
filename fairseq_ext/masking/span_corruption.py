"""MASS-style span masking, ProphetNet's denoising pre-training (Qi et al. 2020, section 2.4
and 3.1; Song et al. 2019): in every block of 64 tokens one contiguous span of 15% of the
block is masked in the encoder input, and the decoder recovers the span. The chosen tokens
are then replaced by BERT's rule (``masking.corruption.replace_80_10_10``)."""

from __future__ import annotations

import numpy as np

from fairseq_ext.masking.corruption import check_example_rng


def _check_blocks(block_size: int, ratio: float) -> None:
    if block_size < 1 or not 0.0 < ratio <= 1.0:
        raise ValueError(f"need block_size >= 1 and 0 < ratio <= 1, got {block_size}, {ratio}")


def block_span_length(block_tokens, ratio: float = 0.15) -> np.ndarray:
    """The span of a block of ``m`` maskable tokens: ``max(1, round(ratio * m))`` tokens
    (rounding half to even, as Python's ``round``), none for an empty block.

    Args:
        block_tokens: ``m``, an int or an int array.

    Returns:
        int64 array of ``block_tokens``' shape.
    """
    m = np.asarray(block_tokens, dtype=np.int64)
    return np.where(m > 0, np.maximum(1, np.round(ratio * m)), 0).astype(np.int64)


def span_lengths(num_tokens, block_size: int = 64, ratio: float = 0.15) -> np.ndarray:
    """Tokens ``block_span_mask`` chooses in lines of ``num_tokens`` maskable tokens: the
    ``block_span_length`` of each full block of ``block_size`` plus that of the rest.

    Args:
        num_tokens: maskable tokens per line, an int or an int array.

    Returns:
        int64 array of ``num_tokens``' shape.
    """
    _check_blocks(block_size, ratio)
    n = np.asarray(num_tokens, dtype=np.int64)
    return n // block_size * block_span_length(block_size, ratio) + block_span_length(
        n % block_size, ratio
    )


def block_span_mask(
    maskable: np.ndarray, rng: np.random.Generator, block_size: int = 64, ratio: float = 0.15
) -> np.ndarray:
    """One contiguous span per block of maskable tokens.

    Rule: the maskable positions (in order) are cut into blocks of ``block_size``; a block of
    ``m`` maskable positions gets one span of ``block_span_length(m, ratio)`` consecutive
    maskable positions, its start uniform among the ``m - span + 1`` possible starts.
    Non-maskable positions (padding, ``</s>``, other special symbols) are never chosen and do
    not count towards a block.

    Args:
        maskable: ``(T,)`` bool, True where a token may be masked.
        rng: the example's generator (``masking.example_rng``).
        block_size: tokens per block (64 in the paper).
        ratio: share of each block that is masked (0.15 in the paper), in (0, 1].

    Returns:
        ``(T,)`` bool, True at the chosen positions.
    """
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

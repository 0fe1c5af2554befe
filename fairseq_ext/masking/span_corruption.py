"""MASS-style span masking (Song et al. 2019), ProphetNet's pre-training noise (Qi et al. 2020,
section 2.4): one contiguous span of 15% per block of 64 maskable tokens."""

from __future__ import annotations

import numpy as np

from fairseq_ext.masking.corruption import check_example_rng


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

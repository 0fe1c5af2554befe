"""T5's bucketed relative positions (Raffel et al. 2020, section 2.1), as ProphetNet's decoder
uses them (Qi et al. 2020, section 2.3)."""

from __future__ import annotations

import math

import torch
from torch import Tensor


def relative_position_bucket(
    relative_position: Tensor,
    num_buckets: int = 32,
    max_distance: int = 128,
    bidirectional: bool = False,
) -> Tensor:
    """T5's bucket of ``key - query``: exact below ``num_buckets // 2``, logarithmic up to
    ``max_distance``."""
    if bidirectional:
        num_buckets //= 2
    exact = num_buckets // 2
    if exact < 1 or max_distance <= exact:
        raise ValueError(
            f"need num_buckets >= {4 if bidirectional else 2} and max_distance > "
            f"{exact} (got num_buckets={num_buckets}, max_distance={max_distance})"
        )
    distance = -relative_position.long()
    offset = torch.zeros_like(distance)
    if bidirectional:
        offset = (distance < 0).long() * num_buckets
        distance = distance.abs()
    else:
        distance = distance.clamp(min=0)
    far = exact + (
        torch.log(distance.float().clamp(min=1) / exact)
        / math.log(max_distance / exact)
        * (num_buckets - exact)
    )
    far = far.clamp(max=num_buckets - 1).long()
    return offset + torch.where(distance < exact, distance, far)


def ngram_stream_positions(positions: Tensor, ngram: int) -> Tensor:
    """A main row stands at ``p_t``, a predicting row at ``p_t + 1`` (the token it predicts)."""
    return torch.cat([positions] + [positions + 1] * ngram, dim=-1)


def ngram_stream_buckets(
    positions: Tensor, ngram: int, num_buckets: int, max_distance: int
) -> Tensor:
    """Buckets of the main keys for every row of the n-stream layout: ``(B, (1 + n) T, T)``."""
    query = ngram_stream_positions(positions, ngram)
    return relative_position_bucket(
        positions.unsqueeze(-2) - query.unsqueeze(-1), num_buckets, max_distance
    )

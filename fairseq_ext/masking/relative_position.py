"""T5-style bucketed relative positions (Raffel et al. 2020, section 2.1), as ProphetNet's
decoder uses them beside its absolute position embeddings (Qi et al. 2020, section 2.3)."""

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
    """Bucket of ``relative_position = key position - query position``.

    Rule (one direction): distance ``d = max(query - key, 0)``; ``d < num_buckets // 2`` gets
    its own bucket ``d``; larger ``d`` share logarithmically wider buckets
    ``b // 2 + floor(log(d / (b // 2)) / log(max_distance / (b // 2)) * (b - b // 2))``,
    capped at ``num_buckets - 1`` (``b = num_buckets``; the log is taken in float32).
    With ``bidirectional`` the buckets are split in half between keys before and after the
    query.

    Args:
        relative_position: integer tensor of any shape.
        num_buckets: number of buckets, >= 2.
        max_distance: distances >= this share the last bucket; > ``num_buckets // 2``
            (per direction).

    Returns:
        ``torch.long`` buckets in ``[0, num_buckets)``, the shape of ``relative_position``.
    """
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
    """The position every row of ProphetNet's n-stream layout stands at (Qi et al. 2020, section
    2.3): a main-stream row at its input token's position ``p_t``, a predicting-stream row at
    ``p_t + 1``, the position of the token it predicts (every stream alike).

    Args:
        positions: ``(B, T)`` or ``(T,)`` absolute positions of the decoder input tokens.

    Returns:
        ``(B, (1 + ngram) * T)`` (or without ``B``), rows ordered ``[main, stream 1, ..., stream n]``.
    """
    return torch.cat([positions] + [positions + 1] * ngram, dim=-1)


def ngram_stream_buckets(
    positions: Tensor, ngram: int, num_buckets: int, max_distance: int
) -> Tensor:
    """Relative-position buckets of the main keys for every query row of ProphetNet's decoder
    self-attention, rows ordered as in ``ngram_stream.ngram_stream_mask``: the bucket of main
    key ``j`` for row ``r`` is that of ``p_j - q_r``, with ``q_r`` from
    ``ngram_stream_positions``. A predicting query's own key stands where the query does
    (relative position 0, bucket 0).

    Args:
        positions: ``(B, T)`` or ``(T,)`` absolute positions of the decoder input tokens.

    Returns:
        ``(B, (1 + ngram) * T, T)`` (or without ``B``) long buckets.
    """
    query = ngram_stream_positions(positions, ngram)
    return relative_position_bucket(
        positions.unsqueeze(-2) - query.unsqueeze(-1), num_buckets, max_distance
    )

"""ProphetNet's n-stream self-attention (Qi et al. 2020, section 2.3, eq. 3-5): the masks,
buckets and folded key layout the model runs, from ``predicates.ngram_stream``, with T5's
bucketed relative positions (Raffel et al. 2020, section 2.1)."""

from __future__ import annotations

import math
from typing import Tuple

import torch
from torch import Tensor

from fairseq_ext.masking.derived import additive_attention_mask, dense_mask, mask_at
from fairseq_ext.masking.predicates import ngram_stream


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


def _check_ngram(ngram: int) -> None:
    if ngram < 1:
        raise ValueError(f"ngram must be >= 1, got {ngram}")


def main_stream_mask(length: int, device=None) -> Tensor:
    """``(T, T)``: main ``t`` sees main ``j <= t``."""
    return dense_mask(ngram_stream(length), 1, 1, length, length, device=device)[0, 0]


def predicting_stream_main_mask(length: int, ngram: int, device=None) -> Tensor:
    """``(n, T, T)``: stream ``k`` at ``t`` sees main ``j <= max(t - k + 1, 0)``."""
    return ngram_stream_mask(length, ngram, device)[length:, :length].reshape(ngram, length, length)


def ngram_stream_mask(length: int, ngram: int, device=None) -> Tensor:
    """The full ``((1 + n) T, (1 + n) T)`` mask over ``[main, stream 1, ..., stream n]``."""
    _check_ngram(ngram)
    size = (1 + ngram) * length
    return dense_mask(ngram_stream(length), 1, 1, size, size, device=device)[0, 0]


def folded_keys(rows: Tensor, keys: int, length: int) -> Tensor:
    """The keys a row can see, in ``keys + 1`` slots: the main keys and the row's own key
    (``-1`` for a main row, which meets itself among the main keys)."""
    main = torch.arange(keys, device=rows.device).expand(rows.numel(), keys)
    own = torch.where(rows >= length, rows, torch.full_like(rows, -1))
    return torch.cat([main, own.view(-1, 1)], dim=1)


def decoding_keys(length: int, device=None) -> Tuple[Tensor, Tensor]:
    """Rows ``[main t, stream 1 t]`` of every cached step ``t`` and their folded keys
    (``-1`` = empty slot)."""
    steps = torch.arange(length, device=device)
    rows = torch.stack([steps, length + steps])
    slots = torch.arange(length + 1, device=device)
    t = steps.view(1, length, 1)
    own = torch.where(rows >= length, rows, torch.full_like(rows, -1)).unsqueeze(-1)
    return rows, torch.where(
        slots <= t, slots, torch.where(slots == t + 1, own, torch.full_like(own, -1))
    )


def ngram_stream_folded_mask(rows: Tensor, keys: Tensor, length: int) -> Tensor:
    """The rule at ``rows`` against ``keys`` (``-1`` never attended)."""
    seen = mask_at(ngram_stream(length), rows.unsqueeze(-1), keys.clamp(min=0))[0, 0]
    return seen & (keys >= 0)


def ngram_stream_key_mask(length: int, ngram: int, device=None) -> Tensor:
    """``ngram_stream_mask`` with keys folded to ``[main 0..T-1, own]``: ``((1 + n) T, T + 1)``."""
    _check_ngram(ngram)
    rows = torch.arange((1 + ngram) * length, device=device)
    return ngram_stream_folded_mask(rows, folded_keys(rows, length, length), length)


class NgramStreamTables:
    """The key masks, buckets and step rows of every length ``<= max_length``, built once and
    sliced (as ProphetNet's release builds its n-gram bias once)."""

    def __init__(
        self, max_length: int, ngram: int, num_buckets: int, max_distance: int, device=None
    ):
        _check_ngram(ngram)
        self.max_length = max_length
        rows = torch.arange((1 + ngram) * max_length, device=device)
        sees = ngram_stream_folded_mask(rows, folded_keys(rows, max_length, max_length), max_length)
        self.sees = sees.view(1 + ngram, max_length, max_length + 1)
        buckets = ngram_stream_buckets(
            torch.arange(max_length, device=device), ngram, num_buckets, max_distance
        )
        compact = torch.uint8 if num_buckets <= 256 else torch.long
        self.buckets = buckets.to(compact).view(1 + ngram, max_length, max_length)
        step_sees = ngram_stream_folded_mask(*decoding_keys(max_length, device), max_length)
        self.step_key_mask = additive_attention_mask(step_sees, torch.float32)

    def key_mask(self, length: int) -> Tensor:
        """Additive float32 ``((1 + n) T, T + 1)`` mask over ``[main keys, own key]``."""
        sees = self.sees[:, :length]
        allowed = torch.cat([sees[..., :length], sees[..., self.max_length :]], dim=-1)
        return additive_attention_mask(allowed.reshape(-1, length + 1), torch.float32)

    def numbered_buckets(self, length: int) -> Tensor:
        """Long ``((1 + n) T, T)`` buckets of the main keys."""
        return self.buckets[:, :length, :length].reshape(-1, length).long()

    def step(self, step: int) -> Tuple[Tensor, Tensor]:
        """Step ``step``'s buckets ``(2, step + 1)`` and additive key mask ``(2, step + 2)``."""
        return self.buckets[:2, step, : step + 1].long(), self.step_key_mask[:, step, : step + 2]

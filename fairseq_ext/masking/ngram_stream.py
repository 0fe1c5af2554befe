"""Who may attend to whom in ProphetNet's n-stream self-attention (Qi et al. 2020, section 2.3,
eq. 3-5, Figure 3): the main stream is causal, predicting stream ``k`` at index ``t`` sees the
main stream up to ``t - k + 1`` (and the start symbol) and itself; the masks, buckets and folded
key layout the model runs, derived from ``predicates.ngram_stream``."""

from __future__ import annotations

from typing import Tuple

import torch
from torch import Tensor

from fairseq_ext.masking.derived import additive_attention_mask, dense_mask, mask_at
from fairseq_ext.masking.predicates import ngram_stream
from fairseq_ext.masking.relative_position import ngram_stream_buckets


def _check_ngram(ngram: int) -> None:
    if ngram < 1:
        raise ValueError(f"ngram must be >= 1, got {ngram}")


def main_stream_mask(length: int, device=None) -> Tensor:
    """Main stream: query ``t`` may attend key ``j`` iff ``j <= t``. Shape ``(T, T)``."""
    return dense_mask(ngram_stream(length), 1, 1, length, length, device=device)[0, 0]


def predicting_stream_main_mask(length: int, ngram: int, device=None) -> Tensor:
    """Predicting stream ``k`` (1..n), query ``t`` may attend main key ``j`` iff
    ``j <= max(t - k + 1, 0)``. Shape ``(n, T, T)``; entry ``[k - 1, t, j]``."""
    _check_ngram(ngram)
    rows = torch.arange(length, (1 + ngram) * length, device=device)
    seen = mask_at(ngram_stream(length), rows.unsqueeze(1), torch.arange(length, device=device))[
        0, 0
    ]
    return seen.reshape(ngram, length, length)


def ngram_stream_mask(length: int, ngram: int, device=None) -> Tensor:
    """The full n-stream self-attention mask, True = may attend, rows = queries, columns =
    keys, both ordered ``[main 0..T-1, stream 1 0..T-1, ..., stream n 0..T-1]``.

    Rule: main ``t`` sees main ``j <= t``; stream ``k`` at ``t`` sees main
    ``j <= max(t - k + 1, 0)`` and itself (stream ``k`` at ``t``); nothing else.

    Returns:
        ``((1 + ngram) * length, (1 + ngram) * length)`` bool.
    """
    _check_ngram(ngram)
    size = (1 + ngram) * length
    return dense_mask(ngram_stream(length), 1, 1, size, size, device=device)[0, 0]


def folded_keys(rows: Tensor, keys: int, length: int) -> Tensor:
    """The keys a row of the n-stream layout (``length`` per stream) can see, folded into
    ``keys + 1`` slots: the main keys ``0 .. keys - 1`` and the row's own key, which is the row
    itself for a predicting row and none (``-1``, an empty slot) for a main row, since a main
    query meets itself among the main keys. No query sees any other predicting key, so
    nothing is lost.

    Returns:
        ``(len(rows), keys + 1)`` long key indices.
    """
    main = torch.arange(keys, device=rows.device).expand(rows.numel(), keys)
    own = torch.where(rows >= length, rows, torch.full_like(rows, -1))
    return torch.cat([main, own.view(-1, 1)], dim=1)


def decoding_keys(length: int, device=None) -> Tuple[Tensor, Tensor]:
    """The rows and keys of cached decoding at every step ``t < length``: rows ``[main t,
    stream 1 t]`` (what incremental decoding computes), ``(2, length)``, and their keys,
    ``(2, length, length + 1)``: slots ``0 .. t`` the cached main keys, slot ``t + 1`` the row's
    own key (as in ``folded_keys``), later slots empty (``-1``)."""
    steps = torch.arange(length, device=device)
    rows = torch.stack([steps, length + steps])
    slots = torch.arange(length + 1, device=device)
    t = steps.view(1, length, 1)
    own = torch.where(rows >= length, rows, torch.full_like(rows, -1)).unsqueeze(-1)
    return rows, torch.where(
        slots <= t, slots, torch.where(slots == t + 1, own, torch.full_like(own, -1))
    )


def ngram_stream_folded_mask(rows: Tensor, keys: Tensor, length: int) -> Tensor:
    """``predicates.ngram_stream(length)`` at query rows ``rows`` (any shape ``R``) against key
    indices ``keys`` (``(*R, K)``, ``-1`` = an empty slot, never attended): ``(*R, K)`` bool."""
    seen = mask_at(ngram_stream(length), rows.unsqueeze(-1), keys.clamp(min=0))[0, 0]
    return seen & (keys >= 0)


def ngram_stream_key_mask(length: int, ngram: int, device=None) -> Tensor:
    """``ngram_stream_mask`` with the keys each query may see folded into ``T + 1`` columns
    (``folded_keys``): the main keys ``0..T-1`` and the query's own key (column ``T``).

    Rule: row ``r`` (ordered as in ``ngram_stream_mask``) has ``[r, j] = full[r, j]`` for main
    keys ``j`` and ``[r, T] = full[r, r]`` for its own key if ``r`` is a predicting query (a main
    query sees itself as main key ``t`` already, so its own-key column is False).

    Returns:
        ``((1 + ngram) * length, length + 1)`` bool.
    """
    _check_ngram(ngram)
    rows = torch.arange((1 + ngram) * length, device=device)
    return ngram_stream_folded_mask(rows, folded_keys(rows, length, length), length)


class NgramStreamTables:
    """What ProphetNet's decoder runs: the folded key masks (``ngram_stream_key_mask``) and the
    relative-position buckets of a target numbered from the start (``ngram_stream_buckets`` of
    ``0 .. T-1``) for every length ``T <= max_length``, and the rows of every cached-decoding
    step (``decoding_keys``), built once at ``max_length`` and sliced, so that nothing grows
    with the lengths seen (ProphetNet's release likewise builds its n-gram attention bias once
    at the longest length).

    The rule depends on a row's stream and index and a key's index only, so the rows of length
    ``T`` are the first ``T`` rows of every stream of the ``max_length`` tables, and step ``t``
    (main and stream 1 at ``t`` against the cached main keys ``0 .. t`` and the row's own key)
    is row ``t`` of the main stream and of stream 1.
    """

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
        """Long ``((1 + n) T, T)`` buckets of the main keys for every row."""
        return self.buckets[:, :length, :length].reshape(-1, length).long()

    def step(self, step: int) -> Tuple[Tensor, Tensor]:
        """Decoding step ``step`` (``step + 1`` cached main keys): rows ``[main, stream 1]`` at
        ``step``, as buckets ``(2, step + 1)`` and additive float32 key mask ``(2, step + 2)``."""
        return self.buckets[:2, step, : step + 1].long(), self.step_key_mask[:, step, : step + 2]

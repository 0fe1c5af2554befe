"""Every attention rule as a FlexAttention ``mask_mod`` (``rule(b, h, q_idx, kv_idx)``, True =
may attend), from elementwise tensor operations only."""

from __future__ import annotations

import functools
import operator
from typing import Callable

import torch
from torch import Tensor

MaskMod = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]


def causal(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
    """Left to right: ``kv <= q``."""
    return kv_idx <= q_idx


def bidirectional(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
    """BERT's encoder (Devlin et al. 2019, section 3): every query sees every key."""
    return (q_idx >= 0) & (kv_idx >= 0)


def prefix_lm(segment_ids: Tensor) -> MaskMod:
    """UniLM's seq2seq rule (Dong et al. 2019, section 2.3): ``kv`` is a source token
    (segment 0), or ``q`` is not and ``kv <= q``."""

    def mask_mod(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        source_key = segment_ids[b, kv_idx] == 0
        return source_key | ((segment_ids[b, q_idx] != 0) & (kv_idx <= q_idx))

    return mask_mod


def permutation(ranks: Tensor, strict: bool = False) -> MaskMod:
    """XLNet's factorisation-order rule (Yang et al. 2019, section 2.2): ``rank[kv] <= rank[q]``
    (``<`` with ``strict``, the query stream); with ``ranks = arange(T)`` it is ``causal``."""
    before = operator.lt if strict else operator.le

    def mask_mod(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return before(ranks[b, kv_idx], ranks[b, q_idx])

    return mask_mod


def padding(padded: Tensor, query_sees_itself: bool = True) -> MaskMod:
    """No query sees a padded key; a padded query sees itself (nothing, without
    ``query_sees_itself``)."""

    def mask_mod(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        if query_sees_itself:
            return torch.where(padded[b, q_idx], q_idx == kv_idx, ~padded[b, kv_idx])
        return ~padded[b, q_idx] & ~padded[b, kv_idx]

    return mask_mod


def ngram_stream(length: int) -> MaskMod:
    """ProphetNet's n-stream rule (Qi et al. 2020, section 2.3, eq. 3-5) over
    ``[main; stream 1; ...; stream n]``, each ``length`` long: main ``t`` sees main ``j <= t``;
    stream ``k`` at ``t`` sees main ``j <= max(t - k + 1, 0)`` and itself."""

    def mask_mod(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        q_stream, t = q_idx // length, q_idx % length
        main_key, j = kv_idx // length == 0, kv_idx % length
        last_seen = torch.where(q_stream == 0, t, (t - q_stream + 1).clamp(min=0))
        return (main_key & (j <= last_seen)) | ((q_stream > 0) & (kv_idx == q_idx))

    return mask_mod


def _combined(mask_mods: tuple, combine: Callable[[Tensor, Tensor], Tensor], name: str) -> MaskMod:
    if not mask_mods:
        raise ValueError(f"{name} needs at least one mask_mod")

    def mask_mod(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return functools.reduce(combine, (rule(b, h, q_idx, kv_idx) for rule in mask_mods))

    return mask_mod


def and_masks(*mask_mods: MaskMod) -> MaskMod:
    """Where every rule holds (FlexAttention's ``and_masks``, without FlexAttention)."""
    return _combined(mask_mods, operator.and_, "and_masks")


def or_masks(*mask_mods: MaskMod) -> MaskMod:
    """Where any rule holds."""
    return _combined(mask_mods, operator.or_, "or_masks")

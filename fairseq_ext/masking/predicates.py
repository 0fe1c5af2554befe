"""Every attention rule of the plugin stated once as a FlexAttention ``mask_mod`` (Dong et al.
2024): ``rule(b, h, q_idx, kv_idx) -> bool``, True = may attend, from elementwise tensor
operations only; causal, bidirectional, prefix LM and permutation (Su 2019), padding and
ProphetNet's n-stream rule (Qi et al. 2020, section 2.3), combined with ``and_masks`` / ``or_masks``."""

from __future__ import annotations

import operator
from typing import Callable

import torch
from torch import Tensor

MaskMod = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]


def causal(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
    """A left-to-right language model (Su 2019, "Unidirectional Language Model"; the lower
    triangle): ``q`` sees ``kv`` iff ``kv <= q``."""
    return kv_idx <= q_idx


def bidirectional(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
    """BERT's encoder (Devlin et al. 2019, section 3; Su 2019's first figure): every query sees
    every key (True over the broadcast shape of the indices)."""
    return (q_idx >= 0) & (kv_idx >= 0)


def prefix_lm(segment_ids: Tensor) -> MaskMod:
    """UniLM's seq2seq rule (Dong et al. 2019, section 2.3; Su 2019, "Seq2Seq") from segment
    ids, ``(B, T)``, 0 for ``[CLS] source [SEP]`` and 1 for the target: ``q`` sees ``kv`` iff
    ``kv`` is a source token, or ``q`` is not a source token and ``kv <= q``.

    So the source is bidirectional, a target token sees the whole source and its own past, and
    no source token sees the target; every query sees itself, whatever the segment id of a
    padded position."""

    def mask_mod(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        source_key = segment_ids[b, kv_idx] == 0
        return source_key | ((segment_ids[b, q_idx] != 0) & (kv_idx <= q_idx))

    return mask_mod


def permutation(ranks: Tensor, strict: bool = False) -> MaskMod:
    """XLNet's factorisation-order rule (Yang et al. 2019, section 2.2; Su 2019, "Permutation
    Language Model") over the tokens in their natural positions: ``q`` sees ``kv`` iff
    ``rank[kv] <= rank[q]`` (``<`` with ``strict``), where ``ranks`` ``(B, T)`` holds the step at
    which each position comes in the order (``attention.order_ranks``).

    ``strict=False`` is the content stream (a token sees itself: Su 2019's "shuffled lower
    triangle"); ``strict=True`` the query stream, Su 2019's picture, in which the first position
    of the order sees nothing. With ``ranks = arange(T)`` (the tokens fed in their order) the
    content stream is ``causal``."""
    if strict:

        def mask_mod(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            return ranks[b, kv_idx] < ranks[b, q_idx]
    else:

        def mask_mod(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            return ranks[b, kv_idx] <= ranks[b, q_idx]

    return mask_mod


def padding(padded: Tensor, query_sees_itself: bool = True) -> MaskMod:
    """Padding, ``padded`` ``(B, T)`` True at padding: no query sees a padded key; a padded
    query sees only itself, so that no row is empty and a softmax over it stays finite (its
    output is meaningless and must be ignored). With ``query_sees_itself=False`` a padded query
    sees nothing (the strict permutation rule's query stream, whose rows may be empty)."""
    if query_sees_itself:

        def mask_mod(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            return torch.where(padded[b, q_idx], q_idx == kv_idx, ~padded[b, kv_idx])
    else:

        def mask_mod(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            return ~padded[b, q_idx] & ~padded[b, kv_idx]

    return mask_mod


def ngram_stream(length: int) -> MaskMod:
    """ProphetNet's n-stream self-attention (Qi et al. 2020, section 2.3, eq. 3-5 and
    Figure 3) over queries and keys laid out as the model runs them, ``[main; stream 1; ...;
    stream n]``, each ``length`` long: index ``s * length + t`` is stream ``s`` (0 = main) at
    decoder index ``t``.

    Main ``t`` sees main ``j <= t``; predicting stream ``k`` at ``t`` sees main
    ``j <= max(t - k + 1, 0)`` (the start symbol always, as ProphetNet's release) and itself;
    nothing else (``masking.ngram_stream`` explains the indexing)."""

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
        allowed = mask_mods[0](b, h, q_idx, kv_idx)
        for other in mask_mods[1:]:
            allowed = combine(allowed, other(b, h, q_idx, kv_idx))
        return allowed

    return mask_mod


def and_masks(*mask_mods: MaskMod) -> MaskMod:
    """The rule that holds where every one of ``mask_mods`` holds (FlexAttention's
    ``and_masks``, written here so that ``masking`` needs no FlexAttention)."""
    return _combined(mask_mods, operator.and_, "and_masks")


def or_masks(*mask_mods: MaskMod) -> MaskMod:
    """The rule that holds where any of ``mask_mods`` holds (FlexAttention's ``or_masks``)."""
    return _combined(mask_mods, operator.or_, "or_masks")

"""What a masked decoder slot is given: [MASK] (M), the copied source (Z) or a mix
``(1 - w) M + w Z`` (Wang et al. 2021, "HI-CMLM"): the decoding rule of each hybrid strategy
(section 3.2, Table 1) and the training rule (section 3.3: a random share of the masked slots
gets Z). Slots are those of fairseq's decoder input (index 0 holds ``<s>``); only masked slots
ever get Z."""

from __future__ import annotations

from typing import Callable, NamedTuple

import torch
from torch import Tensor

FENCE_FIRST = ("mask", "copy")  # the first is the paper's fence (0, 1, 0, 1, ...), section 3.2
PAPER_MASK_WEIGHT = 0.6  # the M weight of weighted_sum, the paper's best (section 3.2)
TRAINING_INPUTS = ("paper", "decoding_rule")


def fence_pattern(num_slots: int, first: str, device=None) -> Tensor:
    """The fence over ``num_slots`` target slots: True where the slot takes Z.

    ``first="mask"`` is the paper's vector (0, 1, 0, 1, ...): written from the first target
    word, 1 at the second, fourth, ... word ("odd positions filled with Z, even positions
    with M", counting the vector's entries from 0). ``first="copy"`` is the other phase,
    (1, 0, 1, 0, ...).
    """
    if first not in FENCE_FIRST:
        raise ValueError(f"unknown fence phase {first!r}; choose one of {FENCE_FIRST}")
    k = torch.arange(num_slots, device=device)
    return k % 2 == (1 if first == "mask" else 0)


def decoder_fence(length: int, first: str, device=None) -> Tensor:
    """``fence_pattern`` laid over a decoder input of ``length`` slots whose index 0 is ``<s>``
    (never on the fence)."""
    no = torch.zeros(1, dtype=torch.bool, device=device)
    return torch.cat([no, fence_pattern(max(length - 1, 0), first, device=device)])


class HybridStrategy(NamedTuple):
    """One row of the decoding table (section 3.2)."""

    copies: bool  # whether any masked slot can get Z (else the decoder input is CMLM's)
    weight: Callable[
        [Tensor, float, str], Tensor
    ]  # (masked as float, mask_weight, fence_first) -> Z weight


def _on_fence(m: Tensor, mask_weight: float, first: str) -> Tensor:
    return m * decoder_fence(m.size(1), first, device=m.device).float().unsqueeze(0)


# The paper's four strategies (section 3.2, Table 1), in its order.
STRATEGY_TABLE: dict[str, HybridStrategy] = {
    "all_mask": HybridStrategy(False, lambda m, mask_weight, first: m * 0.0),
    "all_copied": HybridStrategy(True, lambda m, mask_weight, first: m),
    "weighted_sum": HybridStrategy(True, lambda m, mask_weight, first: m * (1.0 - mask_weight)),
    "fence_replace": HybridStrategy(True, _on_fence),
}
HYBRID_STRATEGIES = tuple(STRATEGY_TABLE)


def _row(strategy: str) -> HybridStrategy:
    if strategy not in STRATEGY_TABLE:
        raise ValueError(f"unknown hybrid strategy {strategy!r}; choose one of {HYBRID_STRATEGIES}")
    return STRATEGY_TABLE[strategy]


def source_copy_weight(
    masked: Tensor, strategy: str, mask_weight: float, fence_first: str
) -> Tensor:
    """Decoding rule (section 3.2): weight of Z in each slot (``STRATEGY_TABLE``); M gets
    ``1 - weight``.

    * ``all_mask``: 0 everywhere (CMLM's input);
    * ``all_copied``: 1 at masked slots;
    * ``weighted_sum``: ``1 - mask_weight`` at masked slots (the paper's best is 0.6 M + 0.4 Z);
    * ``fence_replace``: 1 at masked slots on the fence (``decoder_fence``), 0 elsewhere.

    Unmasked slots always get 0: observed tokens keep their own embedding.

    Args:
        masked: ``(B, T)`` bool over the decoder input (index 0 = ``<s>``), True at masked slots.
        strategy: one of ``HYBRID_STRATEGIES``.
        mask_weight: weight of M for ``weighted_sum``, in [0, 1].
        fence_first: what the first target word gets on the fence, one of ``FENCE_FIRST``.

    Returns:
        ``(B, T)`` float weights in [0, 1].
    """
    return _row(strategy).weight(masked.float(), mask_weight, fence_first)


def decoding_copies_source(strategy: str) -> bool:
    """Whether the strategy's decoding input can give a masked slot Z (section 3.2): every
    strategy but ``all_mask``, whose input is CMLM's."""
    return _row(strategy).copies


def random_copy_slots(
    masked: Tensor, share: float, generator: torch.Generator | None = None
) -> Tensor:
    """Training rule (section 3.3): the random subset of masked slots that gets Z instead of M.

    Each masked slot is chosen independently with probability ``share``, so Z fills
    ``share`` of the masked slots on average and the corrupted slots stay exactly those of
    CMLM's noise. ``share = 0`` is CMLM's training input.

    Args:
        masked: ``(B, T)`` bool, True at masked slots.
        share: probability in [0, 1] that a masked slot gets Z.
        generator: optional RNG (torch's global one otherwise, as fairseq seeds it).

    Returns:
        ``(B, T)`` bool, True at the slots that get Z (a subset of ``masked``).
    """
    if masked.dtype != torch.bool:
        raise ValueError("masked must be a bool tensor")
    draw = torch.rand(masked.shape, generator=generator, device=masked.device)
    return masked & (draw < share)


def training_copy_weight(
    masked: Tensor,
    training_input: str,
    share: float,
    strategy: str,
    mask_weight: float,
    fence_first: str,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Weight of Z in each slot of a training input.

    * ``paper`` (section 3.3): 1 at ``random_copy_slots(masked, share)``, 0 elsewhere, for
      every strategy;
    * ``decoding_rule``: ``source_copy_weight`` of the strategy, as at decoding (an ablation).

    Returns:
        ``(B, T)`` float weights in [0, 1].
    """
    if training_input not in TRAINING_INPUTS:
        raise ValueError(
            f"unknown training input {training_input!r}; choose one of {TRAINING_INPUTS}"
        )
    if training_input == "decoding_rule":
        return source_copy_weight(masked, strategy, mask_weight, fence_first)
    _row(strategy)
    return random_copy_slots(masked, share, generator).float()


def mix_decoder_input(mask_embeddings: Tensor, copied: Tensor, copy_weight: Tensor) -> Tensor:
    """The hybrid decoder input ``(1 - w) * X + w * Z``.

    Args:
        mask_embeddings: ``(B, T, C)`` embeddings of the decoder input tokens (M at masked slots).
        copied: ``(B, T, C)`` copied source embeddings Z (``soft_copy``).
        copy_weight: ``(B, T)`` weight ``w`` of Z, from ``source_copy_weight`` (decoding) or
            ``training_copy_weight`` (training).

    Returns:
        ``(B, T, C)`` mixed embeddings; slots with ``w = 0`` (all unmasked ones) equal
        ``mask_embeddings`` exactly and slots with ``w = 1`` equal ``copied`` exactly
        (``torch.lerp``).
    """
    w = copy_weight.to(mask_embeddings.dtype).unsqueeze(-1)
    return torch.lerp(mask_embeddings, copied.to(mask_embeddings.dtype), w)

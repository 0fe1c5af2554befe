"""What a masked decoder slot gets in HI-CMLM (Wang et al. 2021): [MASK] (M), the copied
source (Z) or ``(1 - w) M + w Z``; the decoding rules of section 3.2 (Table 1), the training
rule of section 3.3 and the soft copy Z (eq. 8-10). Index 0 of a decoder input is ``<s>``; only
masked slots get Z."""

from __future__ import annotations

from typing import Callable, NamedTuple

import torch
from torch import Tensor

FENCE_FIRST = ("mask", "copy")  # the first is the paper's fence (0, 1, 0, 1, ...), section 3.2
PAPER_MASK_WEIGHT = 0.6  # the M weight of weighted_sum, the paper's best (section 3.2)
TRAINING_INPUTS = ("paper", "decoding_rule")


def fence_pattern(num_slots: int, first: str, device=None) -> Tensor:
    """True where a slot takes Z: (0, 1, 0, 1, ...) for ``first="mask"`` (the paper's)."""
    if first not in FENCE_FIRST:
        raise ValueError(f"unknown fence phase {first!r}; choose one of {FENCE_FIRST}")
    k = torch.arange(num_slots, device=device)
    return k % 2 == (1 if first == "mask" else 0)


def decoder_fence(length: int, first: str, device=None) -> Tensor:
    """``fence_pattern`` after the ``<s>`` slot."""
    no = torch.zeros(1, dtype=torch.bool, device=device)
    return torch.cat([no, fence_pattern(max(length - 1, 0), first, device=device)])


class HybridStrategy(NamedTuple):
    """One row of the decoding table (section 3.2)."""

    copies: bool  # whether any masked slot can get Z (else the decoder input is CMLM's)
    # (masked as float, mask_weight, fence_first) -> Z weight
    weight: Callable[[Tensor, float, str], Tensor]


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
    """Decoding rule (section 3.2): the ``(B, T)`` weight of Z, 0 at unmasked slots."""
    return _row(strategy).weight(masked.float(), mask_weight, fence_first)


def decoding_copies_source(strategy: str) -> bool:
    """Whether a masked slot can get Z at decoding: all strategies but ``all_mask``."""
    return _row(strategy).copies


def random_copy_slots(
    masked: Tensor, share: float, generator: torch.Generator | None = None
) -> Tensor:
    """Training rule (section 3.3): each masked slot gets Z with probability ``share``."""
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
    """Training weight of Z: ``paper`` (section 3.3) or ``decoding_rule`` (an ablation)."""
    if training_input not in TRAINING_INPUTS:
        raise ValueError(
            f"unknown training input {training_input!r}; choose one of {TRAINING_INPUTS}"
        )
    if training_input == "decoding_rule":
        return source_copy_weight(masked, strategy, mask_weight, fence_first)
    _row(strategy)
    return random_copy_slots(masked, share, generator).float()


def mix_decoder_input(mask_embeddings: Tensor, copied: Tensor, copy_weight: Tensor) -> Tensor:
    """``torch.lerp(X, Z, w)``: ``w = 0`` gives ``X`` and ``w = 1`` gives ``Z`` exactly."""
    w = copy_weight.to(mask_embeddings.dtype).unsqueeze(-1)
    return torch.lerp(mask_embeddings, copied.to(mask_embeddings.dtype), w)


def _relative_positions(mask: Tensor) -> Tensor:
    """``i / L`` of each position ``i`` among the ``L`` non-pad ones of its row."""
    lengths = mask.sum(dim=1, keepdim=True).clamp(min=1)
    return (mask.long().cumsum(dim=1) - 1).float() / lengths.float()


def relative_position_copy_weights(
    tgt_mask: Tensor, src_mask: Tensor, temperature: float
) -> Tensor:
    """``alpha_ij = softmax_j(-|i / L_Y - j / L_X| / tau)`` (eq. 8-9) over non-pad positions:
    ``(B, T, S)``."""
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    pos_y, pos_x = _relative_positions(tgt_mask), _relative_positions(src_mask)
    distance = -(pos_y.unsqueeze(2) - pos_x.unsqueeze(1)).abs()
    logits = distance / temperature
    logits = logits.masked_fill(~src_mask.unsqueeze(1), torch.finfo(logits.dtype).min)
    return torch.softmax(logits, dim=-1)


def soft_copy(
    src_embeddings: Tensor, src_mask: Tensor, tgt_mask: Tensor, temperature: float
) -> Tensor:
    """``z_i = sum_j alpha_ij e_j`` (eq. 10): ``(B, T, C)``."""
    weights = relative_position_copy_weights(tgt_mask, src_mask, temperature)
    return torch.bmm(weights.to(src_embeddings.dtype), src_embeddings)

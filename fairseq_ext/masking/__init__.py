"""The script of every technique: pure tensor functions, torch only, no fairseq import.

Each function states one masking decision (which tokens are corrupted, what a masked slot
is given, who may attend to whom). Conventions (see ../shared/DESIGN.md):

* a boolean ``True`` means *chosen* (masked, copied) or, for attention masks, *may attend*;
* corruption functions take an optional ``torch.Generator`` and return the positions they chose;
* padding and special tokens are never chosen unless a docstring says otherwise.
"""
from fairseq_ext.masking.corruption import uniform_count_mask
from fairseq_ext.masking.hybrid import (
    HYBRID_STRATEGIES,
    fence_pattern,
    mix_decoder_input,
    source_copy_weight,
)
from fairseq_ext.masking.position_masking import (
    MASK_POSITION,
    PositionMask,
    TokenMask,
    bert_token_mask,
    position_mask,
)
from fairseq_ext.masking.soft_copy import relative_position_copy_weights, soft_copy

__all__ = [
    "HYBRID_STRATEGIES",
    "MASK_POSITION",
    "PositionMask",
    "TokenMask",
    "bert_token_mask",
    "fence_pattern",
    "mix_decoder_input",
    "position_mask",
    "relative_position_copy_weights",
    "soft_copy",
    "source_copy_weight",
    "uniform_count_mask",
]

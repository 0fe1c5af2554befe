"""The script of every technique: pure tensor functions, torch only, no fairseq import.

Each function states one masking decision (which tokens are corrupted, what a masked slot
is given, who may attend to whom). Conventions (see ../shared/DESIGN.md):

* a boolean ``True`` means *chosen* (masked, copied) or, for attention masks, *may attend*;
* corruption functions take an optional ``torch.Generator`` and return the positions they chose;
* padding and special tokens are never chosen unless a docstring says otherwise.
"""
from fairseq_ext.masking.attention import (
    additive_attention_mask,
    bidirectional_mask,
    causal_mask,
    check_order,
    order_ranks,
    permutation_mask,
    prefix_lm_mask,
    random_order,
)
from fairseq_ext.masking.corruption import uniform_count_mask
from fairseq_ext.masking.hybrid import (
    DEFAULT_TRAIN_COPY_SHARE,
    FENCE_FIRST,
    HYBRID_STRATEGIES,
    TRAINING_INPUTS,
    decoder_fence,
    fence_pattern,
    mix_decoder_input,
    random_copy_slots,
    source_copy_weight,
    training_copy_weight,
)
from fairseq_ext.masking.ngram_stream import (
    main_stream_mask,
    ngram_stream_key_mask,
    ngram_stream_mask,
    predicting_stream_main_mask,
)
from fairseq_ext.masking.position_masking import (
    MASK_POSITION,
    PositionMask,
    TokenMask,
    bert_token_mask,
    position_mask,
)
from fairseq_ext.masking.relative_position import ngram_stream_buckets, relative_position_bucket
from fairseq_ext.masking.soft_copy import relative_position_copy_weights, soft_copy
from fairseq_ext.masking.span_corruption import block_span_mask, replace_80_10_10

__all__ = [
    "additive_attention_mask",
    "bert_token_mask",
    "bidirectional_mask",
    "block_span_mask",
    "causal_mask",
    "check_order",
    "decoder_fence",
    "DEFAULT_TRAIN_COPY_SHARE",
    "FENCE_FIRST",
    "fence_pattern",
    "HYBRID_STRATEGIES",
    "main_stream_mask",
    "MASK_POSITION",
    "mix_decoder_input",
    "ngram_stream_buckets",
    "ngram_stream_key_mask",
    "ngram_stream_mask",
    "order_ranks",
    "permutation_mask",
    "position_mask",
    "PositionMask",
    "predicting_stream_main_mask",
    "prefix_lm_mask",
    "random_copy_slots",
    "random_order",
    "relative_position_bucket",
    "relative_position_copy_weights",
    "replace_80_10_10",
    "soft_copy",
    "source_copy_weight",
    "TokenMask",
    "training_copy_weight",
    "TRAINING_INPUTS",
    "uniform_count_mask",
]

"""The masking decisions of the four techniques as pure tensor functions (torch and numpy,
no fairseq); docs/masking.md states the conventions (True = chosen / may attend)."""

# ruff: noqa: F401  (the names this package exports)

from fairseq_ext.masking import predicates
from fairseq_ext.masking.attention import check_order, order_ranks, padded_dense_mask, random_order
from fairseq_ext.masking.attention_variants import ATTENTION_VARIANTS
from fairseq_ext.masking.corruption import example_rng, replace_80_10_10, uniform_count_mask
from fairseq_ext.masking.derived import additive_attention_mask, mask_picture, step_mask
from fairseq_ext.masking.hybrid import (
    FENCE_FIRST,
    HYBRID_STRATEGIES,
    PAPER_MASK_WEIGHT,
    TRAINING_INPUTS,
    decoding_copies_source,
    mix_decoder_input,
    source_copy_weight,
    training_copy_weight,
)
from fairseq_ext.masking.ngram_stream import NgramStreamTables
from fairseq_ext.masking.position_masking import MASK_POSITION, bert_token_mask, position_mask
from fairseq_ext.masking.relative_position import ngram_stream_buckets
from fairseq_ext.masking.soft_copy import soft_copy
from fairseq_ext.masking.span_corruption import block_span_mask, span_lengths

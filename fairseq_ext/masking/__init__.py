"""The masking decisions of the four techniques as pure tensor functions (torch and numpy,
no fairseq); docs/masking.md states the conventions (True = chosen / may attend)."""

# ruff: noqa: F401  (the names this package exports)

from fairseq_ext.masking import predicates
from fairseq_ext.masking.attention import check_order, order_ranks, padded_dense_mask, random_order
from fairseq_ext.masking.attention_variants import ATTENTION_VARIANTS
from fairseq_ext.masking.corruption import (
    MASK_POSITION,
    bert_token_mask,
    block_span_mask,
    example_rng,
    position_mask,
    replace_80_10_10,
    span_lengths,
    uniform_count_mask,
)
from fairseq_ext.masking.derived import additive_attention_mask, mask_picture, step_mask
from fairseq_ext.masking.hybrid import (
    FENCE_FIRST,
    HYBRID_STRATEGIES,
    PAPER_MASK_WEIGHT,
    TRAINING_INPUTS,
    decoding_copies_source,
    mix_decoder_input,
    soft_copy,
    source_copy_weight,
    training_copy_weight,
)
from fairseq_ext.masking.ngram_stream import NgramStreamTables, ngram_stream_buckets

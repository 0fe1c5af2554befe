"""The script of every technique: pure tensor functions, torch and numpy only, no fairseq import.

Each function states one masking decision (which tokens are corrupted, what a masked slot
is given, who may attend to whom), once; training, decoding and analysis call it. Conventions:

* a boolean ``True`` means *chosen* (masked, copied) or, for attention masks, *may attend*;
* padding and special tokens are never chosen unless a docstring says otherwise;
* one rule per corruption: BERT's 80/10/10 is ``replace_80_10_10`` (token masking, position
  masking and MASS spans all call it), the span count is ``block_span_length``, the hybrid
  decoder input is ``STRATEGY_TABLE``;
* random numbers: a rule draws where its tensor lives, from one kind of generator per place.
  Per-example rules, drawn in a dataset's ``__getitem__`` (``choose_share``,
  ``replace_80_10_10``, ``bert_token_mask``, ``position_mask``, ``block_span_mask``), take a
  required ``numpy.random.Generator`` from ``example_rng(seed, epoch, index)``, fairseq's
  ``MaskTokensDataset`` scheme: the draws are reproducible, new each epoch and the same
  whatever the batch order, data-loader worker or distributed rank, and BERT's token masking
  equals fairseq's ``masked_lm`` draw for draw (a torch generator cannot reproduce those
  draws). Per-batch rules, drawn in a task or model on the batch's device
  (``uniform_count_mask``, ``random_copy_slots``, ``random_order``), take an optional
  ``torch.Generator``; None is torch's global generator, which fairseq's trainer reseeds
  from ``--seed`` and the update number before every step (numpy cannot draw on a GPU).
  Example order is fairseq's: ``ordered_indices`` draws from numpy's global generator, which
  fairseq seeds around the call.
"""
from fairseq_ext.masking import predicates
from fairseq_ext.masking.attention import (
    bidirectional_mask,
    causal_mask,
    check_order,
    check_segment_ids,
    order_ranks,
    padded_dense_mask,
    permutation_mask,
    prefix_lm_mask,
    random_order,
)
from fairseq_ext.masking.attention_variants import ATTENTION_VARIANTS, AttentionVariant, masks_of_task
from fairseq_ext.masking.corruption import choose_share, example_rng, replace_80_10_10, uniform_count_mask
from fairseq_ext.masking.hybrid import (
    DEFAULT_TRAIN_COPY_SHARE,
    FENCE_FIRST,
    HYBRID_STRATEGIES,
    STRATEGY_TABLE,
    TRAINING_INPUTS,
    decoder_fence,
    decoding_copies_source,
    fence_pattern,
    mix_decoder_input,
    random_copy_slots,
    source_copy_weight,
    training_copy_weight,
)
from fairseq_ext.masking.derived import additive_attention_mask, dense_mask, mask_at, mask_picture, step_mask
from fairseq_ext.masking.ngram_stream import (
    NgramStreamTables,
    decoding_keys,
    folded_keys,
    main_stream_mask,
    ngram_stream_folded_mask,
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
from fairseq_ext.masking.predicates import MaskMod, and_masks, or_masks
from fairseq_ext.masking.relative_position import (
    ngram_stream_buckets,
    ngram_stream_positions,
    relative_position_bucket,
)
from fairseq_ext.masking.soft_copy import relative_position_copy_weights, soft_copy
from fairseq_ext.masking.span_corruption import block_span_length, block_span_mask, span_lengths

__all__ = [
    "additive_attention_mask",
    "and_masks",
    "ATTENTION_VARIANTS",
    "AttentionVariant",
    "bert_token_mask",
    "bidirectional_mask",
    "block_span_length",
    "block_span_mask",
    "causal_mask",
    "check_order",
    "check_segment_ids",
    "choose_share",
    "decoder_fence",
    "decoding_copies_source",
    "decoding_keys",
    "DEFAULT_TRAIN_COPY_SHARE",
    "dense_mask",
    "example_rng",
    "FENCE_FIRST",
    "fence_pattern",
    "folded_keys",
    "HYBRID_STRATEGIES",
    "main_stream_mask",
    "mask_at",
    "mask_picture",
    "masks_of_task",
    "MASK_POSITION",
    "MaskMod",
    "mix_decoder_input",
    "ngram_stream_buckets",
    "ngram_stream_folded_mask",
    "ngram_stream_key_mask",
    "ngram_stream_mask",
    "ngram_stream_positions",
    "NgramStreamTables",
    "or_masks",
    "order_ranks",
    "padded_dense_mask",
    "permutation_mask",
    "position_mask",
    "PositionMask",
    "predicates",
    "predicting_stream_main_mask",
    "prefix_lm_mask",
    "random_copy_slots",
    "random_order",
    "relative_position_bucket",
    "relative_position_copy_weights",
    "replace_80_10_10",
    "soft_copy",
    "source_copy_weight",
    "span_lengths",
    "step_mask",
    "STRATEGY_TABLE",
    "TokenMask",
    "training_copy_weight",
    "TRAINING_INPUTS",
    "uniform_count_mask",
]

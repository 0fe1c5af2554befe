"""The masks of ``unilm_transformer`` (``--attention-mask``), one entry each: the option, the
model and ``analysis.draw_mask`` read this table (docs/new-technique.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict

from torch import Tensor

from fairseq_ext.masking import predicates
from fairseq_ext.masking.predicates import MaskMod


@dataclass(frozen=True)
class AttentionVariant:
    """One ``--attention-mask``: ``rule(segment_ids, ranks) -> mask_mod``; ``incremental`` when
    cached decoding equals recomputation (no source row sees the target, no target row a later
    one); ``random_order`` when training draws a fresh order per sequence."""

    rule: Callable[[Tensor, Tensor], MaskMod]
    help: str
    incremental: bool
    random_order: bool = False


ATTENTION_VARIANTS: Dict[str, AttentionVariant] = {
    "prefix": AttentionVariant(
        lambda segment_ids, ranks: predicates.prefix_lm(segment_ids),
        "UniLM seq2seq (Su 2019, 'Seq2Seq'): bidirectional source, causal target",
        incremental=True,
    ),
    "causal": AttentionVariant(
        lambda segment_ids, ranks: predicates.causal,
        "left to right throughout (Su 2019, 'Unidirectional Language Model')",
        incremental=True,
    ),
    "permutation": AttentionVariant(
        lambda segment_ids, ranks: predicates.permutation(ranks),
        "XLNet-style random factorisation order (Su 2019, 'Permutation Language Model'): the "
        "tokens are fed in the order, where the rule is causal",
        incremental=True,
        random_order=True,
    ),
}

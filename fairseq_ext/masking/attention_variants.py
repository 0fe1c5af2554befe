"""The attention masks of ``unilm_transformer`` (``--attention-mask``), one registry entry each:
Su 2019 ("Transformer is like a play, it all depends on the mask") shows that one stack becomes
a different model by the mask alone. An entry names its rule (``masking.predicates``) and what
the model needs to know about it; the option's choices, help and error message, the model's
masks (full pass and cached decoding) and ``analysis.draw_mask`` all read this table, so a new
mask is one entry (and its name among the masks a task trains, ``fairseq_ext.common.families``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict

from torch import Tensor

from fairseq_ext.masking import predicates
from fairseq_ext.masking.predicates import MaskMod


@dataclass(frozen=True)
class AttentionVariant:
    """One ``--attention-mask``.

    Attributes:
        rule: ``rule(segment_ids, ranks) -> mask_mod`` over the sequence as the stack reads it,
            from its segment ids (``(B, T)``: 0 for ``<s> source </s>``, 1 for the target) and
            factorisation ranks (``(B, T)``: the step at which each position comes; ``arange``
            where the tokens are fed in their order, as the model always feeds them).
        help: one line for ``--help``.
        incremental: cached decoding (one target row per step against the cached keys and
            values) equals recomputing the whole sequence, because under the rule no source row
            sees the target and no target row sees a later one. Without it the model decodes by
            recomputation.
        random_order: the rule reads a fresh factorisation order per sequence and update,
            which the training code draws (``attention.random_order``) and feeds as ``ranks``.
    """

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

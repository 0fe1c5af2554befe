"""The options of ``unilm_transformer``: the attention mask, BERT-base's sizes and the
RoBERTa checkpoint to start from."""

from dataclasses import dataclass
from typing import Optional

from fairseq.dataclass import ChoiceEnum
from fairseq.utils import get_available_activation_fns

from fairseq_ext.common.config_fields import Range, option
from fairseq_ext.masking import ATTENTION_VARIANTS
from fairseq_ext.models.shared_options import AttentionBackendConfig, LayerNormEpsConfig

AT_LEAST_ONE = Range(1)
DROPOUT = Range(0, 1, high_open=True)


@dataclass
class UniLMTransformerConfig(LayerNormEpsConfig, AttentionBackendConfig):
    attention_mask: Optional[str] = option(
        None,
        "; ".join(f"{name}: {v.help}" for name, v in ATTENTION_VARIANTS.items())
        + "; unset: the task's (prefix for unilm_seq2seq, permutation for permutation_lm)",
        registry=ATTENTION_VARIANTS,
    )
    encoder_layers: int = option(12, "number of layers (BERT-base's 12)", range=AT_LEAST_ONE)
    encoder_embed_dim: int = option(768, "model dimension (BERT-base's 768)", range=AT_LEAST_ONE)
    encoder_ffn_embed_dim: int = option(
        3072, "FFN dimension (BERT-base's 3072)", range=AT_LEAST_ONE
    )
    encoder_attention_heads: int = option(
        12, "attention heads (BERT-base's 12)", range=AT_LEAST_ONE
    )
    max_positions: int = option(
        512,
        "positions of the whole sequence <s> source </s> target (BERT's 512; at least <s>, one "
        "token, </s>)",
        range=Range(3),
    )
    activation_fn: ChoiceEnum(get_available_activation_fns()) = option(
        "gelu", "activation of the FFN and the LM head (BERT's gelu)"
    )
    dropout: float = option(0.1, "dropout probability (BERT's 0.1)", range=DROPOUT)
    attention_dropout: float = option(0.1, "attention dropout (BERT's 0.1)", range=DROPOUT)
    activation_dropout: float = option(0.0, "FFN activation dropout", range=DROPOUT)
    init_from: Optional[str] = option(
        None,
        "initialise from a fairseq roberta (or position_masked_roberta) checkpoint trained with "
        "the same dictionary (Su 2019 starts from BERT)",
    )

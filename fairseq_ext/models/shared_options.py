"""Options several models share, as configs the models' configs inherit."""

from dataclasses import dataclass

from fairseq.dataclass import ChoiceEnum, FairseqDataclass

from fairseq_ext.common.config_fields import Range, option
from fairseq_ext.modules.flex_attention import ATTENTION_BACKENDS


@dataclass
class LayerNormEpsConfig(FairseqDataclass):
    layernorm_eps: float = option(
        1e-5,
        "epsilon of every layer norm: fairseq's 1e-5; a converted BERT checkpoint computes BERT's "
        "function only with BERT's 1e-12 (python -m fairseq_ext.convert prints the value)",
        range=Range(0, low_open=True),
    )


@dataclass
class AttentionBackendConfig(FairseqDataclass):
    attention_backend: ChoiceEnum(ATTENTION_BACKENDS) = option(
        "dense",
        "self-attention of full passes: dense (the dense mask of the rule, every device) or flex "
        "(FlexAttention's block mask of the same rule; for training and scoring on CUDA, needs "
        "--attention-dropout 0 in training; cached decoding stays dense)",
    )


@dataclass
class StraightThroughConfig(FairseqDataclass):
    attention_dropout_straight_through: bool = option(
        False,
        "drop attention weights in the forward pass but pass their gradient through without the "
        "dropout mask (enhanced dropout gradient, Wagner et al. 2020, section 2.2)",
    )

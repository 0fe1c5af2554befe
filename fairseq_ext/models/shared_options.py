"""Options several models share, as configs the models' configs inherit, and the base of the
models that add a config to an argparse-configured fairseq model."""

from dataclasses import dataclass

from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from torch import nn

from fairseq_ext.checkpoints.shapes import CheckpointShapeCheckMixin
from fairseq_ext.common.config_fields import Range, add_config_args, option
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


def set_layernorm_eps(model: nn.Module, eps: float) -> None:
    """Set ``eps`` (``--layernorm-eps``) on every layer norm of ``model``."""
    for module in model.modules():
        if isinstance(module, nn.LayerNorm) or (
            hasattr(module, "normalized_shape") and hasattr(module, "eps")
        ):
            module.eps = eps


class ConfiguredModel(CheckpointShapeCheckMixin):
    """Mix into a fairseq model configured by argparse (CMLM, Transformer, RoBERTa), first in the
    bases: its options are the parent's plus the dataclass ``options_config``
    (``config_fields.model_config``), and ``load_state_dict`` checks shapes first."""

    options_config: type

    @classmethod
    def add_args(cls, parser):
        super().add_args(parser)
        add_config_args(parser, cls.options_config)

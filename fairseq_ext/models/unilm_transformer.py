"""``unilm_transformer``: one BERT-like stack whose attention mask (``--attention-mask``) makes it
UniLM's seq2seq model (Dong et al. 2019), a left-to-right LM or XLNet's permutation LM (Yang et
al. 2019), as Su 2019 explains."""

from dataclasses import dataclass
from typing import Optional

from fairseq.dataclass import ChoiceEnum
from fairseq.models import FairseqEncoderDecoderModel, register_model, register_model_architecture
from fairseq.utils import get_available_activation_fns
from torch import Tensor

from fairseq_ext.checkpoints.shapes import CheckpointShapeCheckMixin
from fairseq_ext.common.config_fields import (
    Range,
    check_config,
    fill_defaults,
    option,
    option_value,
    set_unset,
)
from fairseq_ext.common.errors import require
from fairseq_ext.common.interfaces import UniLMTask
from fairseq_ext.masking import ATTENTION_VARIANTS
from fairseq_ext.models.shared_options import (
    AttentionBackendConfig,
    LayerNormEpsConfig,
    set_layernorm_eps,
)
from fairseq_ext.models.unilm_stack import UniLMDecoder, UniLMStack
from fairseq_ext.modules.flex_attention import check_attention_backend

DEFAULT_ATTENTION_MASK = "prefix"  # under a task that is no UniLMTask: UniLM's own
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


def validate_unilm_args(args) -> None:
    """Refuse out-of-range options and sizes that do not fit together."""
    check_config(args, UniLMTransformerConfig)
    check_attention_backend(option_value(args, "attention_backend"))
    require(
        args.encoder_embed_dim % args.encoder_attention_heads == 0,
        f"--encoder-embed-dim {args.encoder_embed_dim} must be divisible by "
        f"--encoder-attention-heads {args.encoder_attention_heads}",
    )


@register_model("unilm_transformer", dataclass=UniLMTransformerConfig)
class UniLMTransformerModel(CheckpointShapeCheckMixin, FairseqEncoderDecoderModel):
    shape_options = (
        ("embed_positions.weight", "--max-positions"),
        ("embed_next_positions.weight", "--max-positions"),
    )
    dictionary_hint = " (and the same --keep-tokens FILE if it was trained with one)"

    @classmethod
    def build_model(cls, args, task):
        fill_defaults(args, UniLMTransformerConfig)  # a checkpoint saved before an option existed
        if args.attention_mask is None:  # the task's own script by default
            args.attention_mask = (
                task.default_attention_mask()
                if isinstance(task, UniLMTask)
                else DEFAULT_ATTENTION_MASK
            )
        validate_unilm_args(args)
        stack = UniLMStack(args, task.source_dictionary)
        set_layernorm_eps(stack, args.layernorm_eps)
        return cls(args, stack, UniLMDecoder(task.target_dictionary, stack))

    def __init__(self, args, encoder: UniLMStack, decoder: UniLMDecoder):
        super().__init__(encoder, decoder)
        self.args = args

    @property
    def attention_mask(self) -> str:
        return self.encoder.attention_mask

    def forward(
        self,
        src_tokens: Tensor,
        src_lengths: Optional[Tensor] = None,
        prev_output_tokens: Optional[Tensor] = None,
        order: Optional[Tensor] = None,
        **unused,
    ):
        """Seq2seq with ``prev_output_tokens``, a language model in the order ``order`` without."""
        if prev_output_tokens is None:
            return self.encoder.lm_logits(src_tokens, order), {"attn": None}
        return self.encoder.seq2seq_logits(src_tokens, prev_output_tokens), {"attn": None}

    def max_positions(self):
        return self.encoder.max_positions(), self.encoder.max_positions()


@register_model_architecture("unilm_transformer", "unilm_transformer_base")
def unilm_transformer_base(args):
    """BERT-base sizes (UniLM's setting)."""


@register_model_architecture("unilm_transformer", "unilm_transformer_small")
def unilm_transformer_small(args):
    """all-MiniLM-L6-v2's sizes (docs/results/gigaword-10k.md)."""
    set_unset(
        args,
        encoder_layers=6,
        encoder_embed_dim=384,
        encoder_ffn_embed_dim=1536,
        encoder_attention_heads=12,
        max_positions=512,
    )


@register_model_architecture("unilm_transformer", "unilm_transformer_tiny")
def unilm_transformer_tiny(args):
    """Tests and CPU smoke runs."""
    set_unset(
        args,
        encoder_layers=2,
        encoder_embed_dim=128,
        encoder_ffn_embed_dim=512,
        encoder_attention_heads=4,
        max_positions=256,
    )

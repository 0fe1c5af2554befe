"""``position_masked_roberta``: RoBERTa plus a mask-position embedding and a position classifier
(Wagner et al. 2020, section 2.1, Figure 2), built only for a task that masks positions."""

import logging
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from fairseq.models import register_model, register_model_architecture
from fairseq.models.roberta.model import RobertaEncoder, RobertaModel, roberta_large_architecture
from fairseq.models.roberta.model import base_architecture as roberta_base_architecture
from fairseq.models.transformer import TransformerEncoder
from fairseq.modules.transformer_sentence_encoder import init_bert_params
from fairseq.utils import safe_getattr, safe_hasattr
from torch import Tensor, nn

from fairseq_ext.common.config_fields import check_config, fill_defaults, set_sizes
from fairseq_ext.common.errors import require
from fairseq_ext.common.interfaces import PositionMaskingTask
from fairseq_ext.masking import MASK_POSITION
from fairseq_ext.models.shared_options import (
    ConfiguredModel,
    LayerNormEpsConfig,
    StraightThroughConfig,
    set_layernorm_eps,
)
from fairseq_ext.modules import apply_straight_through_from_args

logger = logging.getLogger(__name__)

POSITION_HEAD_KEYS = ("encoder.mask_position_embedding", "encoder.position_classifier.")
# a converted BERT's segment embeddings: this one-segment model has segment 0 in its positions
SEGMENT_KEYS = ("encoder.sentence_encoder.embed_segments.",)
SEGMENTS_DROPPED = "the checkpoint's segment embeddings (%s): one segment, part of the positions'"
HEAD_DROPPED = "the pre-training position head of the checkpoint (%s): the task masks no positions"


@dataclass
class PositionMaskedRobertaConfig(StraightThroughConfig, LayerNormEpsConfig):
    """The options ``position_masked_roberta`` adds to RoBERTa's."""


class GivenPositionsTransformerEncoder(TransformerEncoder):
    """fairseq's ``TransformerEncoder`` taking the position embeddings of one call as given."""

    def __init__(self, args, dictionary, embed_tokens):
        super().__init__(args, dictionary, embed_tokens)
        self._given_positions: Optional[Tensor] = None

    def forward(
        self,
        src_tokens,
        src_lengths=None,
        return_all_hiddens: bool = False,
        token_embeddings=None,
        position_embeddings: Optional[Tensor] = None,
    ):
        self._given_positions = position_embeddings
        try:
            return super().forward(src_tokens, src_lengths, return_all_hiddens, token_embeddings)
        finally:
            self._given_positions = None

    def forward_embedding(self, src_tokens, token_embedding: Optional[Tensor] = None):
        if self._given_positions is None:
            return super().forward_embedding(src_tokens, token_embedding)
        if token_embedding is None:
            token_embedding = self.embed_tokens(src_tokens)
        embed = self.embed_scale * token_embedding
        x = embed + self._given_positions
        if self.layernorm_embedding is not None:
            x = self.layernorm_embedding(x)
        x = self.dropout_module(x)
        if self.quant_noise is not None:
            x = self.quant_noise(x)
        return x, embed


class PositionMaskedRobertaEncoder(RobertaEncoder):
    """RoBERTa's encoder, with ``predicts_positions`` also the position head."""

    def __init__(self, args, dictionary, predicts_positions: bool):
        super().__init__(args, dictionary)
        self.predicts_positions = predicts_positions
        if predicts_positions:
            dim = args.encoder_embed_dim
            self.mask_position_embedding = nn.Parameter(
                torch.empty(dim).normal_(mean=0.0, std=0.02)
            )
            self.position_classifier = nn.Linear(dim, args.max_positions)

    def build_encoder(self, args, dictionary, embed_tokens):
        encoder = GivenPositionsTransformerEncoder(args, dictionary, embed_tokens)
        encoder.apply(init_bert_params)
        return encoder

    def input_position_embeddings(self, src_tokens: Tensor, src_positions: Tensor) -> Tensor:
        """The embedding of ``src_positions``, the mask-position one at ``MASK_POSITION``."""
        table = self.sentence_encoder.embed_positions
        pad = table.padding_idx
        # fairseq's learned positions: row pad + 1 + i for the i-th token, row pad for padding;
        # the mask-position embedding is looked up as one more row after the table
        weight = torch.cat(
            [table.weight, self.mask_position_embedding.to(table.weight.dtype)[None]]
        )
        rows = torch.where(
            src_positions == MASK_POSITION, table.num_embeddings, src_positions + pad + 1
        )
        rows = rows.masked_fill(src_tokens.eq(self.sentence_encoder.padding_idx), pad)
        return F.embedding(rows, weight, pad)

    def forward(
        self,
        src_tokens,
        features_only=False,
        return_all_hiddens=False,
        masked_tokens=None,
        src_positions: Optional[Tensor] = None,
        masked_positions: Optional[Tensor] = None,
        **unused,
    ):
        """As ``RobertaEncoder.forward``; ``extra["position_logits"]`` holds the classifier's
        ``(N, max_positions)`` logits of the ``masked_positions`` tokens."""
        limit = self.max_positions()
        require(
            src_tokens.size(1) <= limit,
            f"an input has {src_tokens.size(1)} tokens, more than the {limit} positions of "
            "position_masked_roberta (its position embedding and classifier); use "
            "--tokens-per-sample / --max-positions <= that, or shorten the input",
        )
        uses_head = src_positions is not None or masked_positions is not None
        require(
            not uses_head or self.predicts_positions,
            "position_masked_roberta was built without its position head (the task does "
            "not mask positions); train it with --task position_masked_lm",
        )
        given = None
        if src_positions is not None:
            given = self.input_position_embeddings(src_tokens, src_positions)
        encoder_out = self.sentence_encoder(
            src_tokens,
            return_all_hiddens=return_all_hiddens,
            token_embeddings=unused.get("token_embeddings"),
            position_embeddings=given,
        )
        features = encoder_out["encoder_out"][0].transpose(0, 1)
        extra = {"inner_states": encoder_out["encoder_states"] if return_all_hiddens else None}
        if masked_positions is not None:
            extra["position_logits"] = self.position_classifier(features[masked_positions])
        if not features_only:
            features = self.output_layer(features, masked_tokens=masked_tokens)
        return features, extra


@register_model("position_masked_roberta")
class PositionMaskedRobertaModel(ConfiguredModel, RobertaModel):
    """RoBERTa with the mask-position embedding and the position classifier."""

    options_config = PositionMaskedRobertaConfig

    shape_options = (
        ("embed_positions.weight", "--max-positions (--tokens-per-sample)"),
        ("position_classifier.weight", "--max-positions (--tokens-per-sample)"),
        ("position_classifier.bias", "--max-positions (--tokens-per-sample)"),
    )

    @classmethod
    def build_model(cls, args, task):
        from omegaconf import OmegaConf

        if OmegaConf.is_config(args):
            OmegaConf.set_struct(args, False)
        position_masked_roberta_architecture(args)
        if not safe_hasattr(args, "max_positions"):
            if not safe_hasattr(args, "tokens_per_sample"):
                args.tokens_per_sample = task.max_positions()
            args.max_positions = args.tokens_per_sample
        predicts = isinstance(task, PositionMaskingTask)
        validate_position_args(args, task)
        encoder = PositionMaskedRobertaEncoder(args, task.source_dictionary, predicts)
        if OmegaConf.is_config(args):
            OmegaConf.set_struct(args, True)
        model = cls(args, encoder)
        set_layernorm_eps(model, args.layernorm_eps)
        apply_straight_through_from_args(model, args)
        if not predicts:
            logger.info(
                "position_masked_roberta: built without the position head (task %s does not "
                "mask positions)",
                type(task).__name__,
            )
        return model

    def upgrade_state_dict_named(self, state_dict, name):
        super().upgrade_state_dict_named(state_dict, name)
        prefix = name + "." if name else ""
        heads = () if self.encoder.predicts_positions else POSITION_HEAD_KEYS
        for starts, what in ((SEGMENT_KEYS, SEGMENTS_DROPPED), (heads, HEAD_DROPPED)):
            dropped = sorted(
                k for k in state_dict if k.startswith(tuple(prefix + s for s in starts))
            )
            for k in dropped:
                del state_dict[k]
            if dropped:
                logger.info("position_masked_roberta: dropped " + what, ", ".join(dropped))


def validate_position_args(args, task) -> None:
    """Refuse out-of-range options and settings the position head cannot honour."""
    check_config(args, PositionMaskedRobertaConfig)
    require(args.max_positions >= 2, f"--max-positions must be >= 2, got {args.max_positions}")
    require(
        safe_getattr(args, "encoder_learned_pos", True)
        and not safe_getattr(args, "no_token_positional_embeddings", False),
        "position_masked_roberta needs learned position embeddings (no "
        "--no-token-positional-embeddings, --encoder-learned-pos)",
    )
    if isinstance(task, PositionMaskingTask):
        longest = task.longest_example()
        require(
            longest <= args.max_positions,
            f"--tokens-per-sample {longest} is more than the {args.max_positions} "
            "classes of the position classifier (one per position, --max-positions); "
            "lower --tokens-per-sample or raise --max-positions",
        )


@register_model_architecture("position_masked_roberta", "position_masked_roberta_base")
@register_model_architecture("position_masked_roberta", "position_masked_roberta")
def position_masked_roberta_architecture(args):
    """``PositionMaskedRobertaConfig``'s defaults on RoBERTa base (the paper's model, section
    3)."""
    fill_defaults(args, PositionMaskedRobertaConfig)
    roberta_base_architecture(args)


@register_model_architecture("position_masked_roberta", "position_masked_roberta_large")
def position_masked_roberta_large_architecture(args):
    fill_defaults(args, PositionMaskedRobertaConfig)
    roberta_large_architecture(args)


@register_model_architecture("position_masked_roberta", "position_masked_roberta_tiny")
def position_masked_roberta_tiny_architecture(args):
    """BERT-Tiny sizes: tests and the CPU sweep."""
    set_sizes(
        args, layers=2, embed_dim=128, ffn_embed_dim=512, attention_heads=2, sides=("encoder",)
    )
    position_masked_roberta_architecture(args)

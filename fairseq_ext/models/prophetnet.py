"""``prophetnet``: fairseq's Transformer encoder and a decoder that predicts the next ``n``
tokens with n-stream self-attention (Qi et al. 2020, section 2.3); incremental decoding runs the
main stream and stream 1 only."""

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Union

import torch
import torch.nn.functional as F
from fairseq import utils
from fairseq.models import FairseqIncrementalDecoder, register_model, register_model_architecture
from fairseq.models.transformer import TransformerEncoder, TransformerModel
from fairseq.models.transformer.transformer_legacy import base_architecture
from fairseq.modules import LayerNorm
from fairseq.modules.fairseq_dropout import FairseqDropout
from fairseq.modules.transformer_sentence_encoder import init_bert_params
from torch import Tensor, nn

from fairseq_ext.common.config_fields import (
    Range,
    check_config,
    fill_defaults,
    option,
    option_value,
    set_sizes,
    set_unset,
)
from fairseq_ext.common.errors import require
from fairseq_ext.masking import NgramStreamTables, ngram_stream_buckets
from fairseq_ext.models.shared_options import AttentionBackendConfig, ConfiguredModel
from fairseq_ext.modules import ProphetNetDecoderLayer
from fairseq_ext.modules.flex_attention import NgramStreamBlockMask, check_attention_backend
from fairseq_ext.modules.ngram_self_attention import IncrementalState


@dataclass
class ProphetNetConfig(AttentionBackendConfig):
    ngram: int = option(
        2,
        "number of predicting streams: tokens predicted at each step (section 2.3; 1 = next-token "
        "prediction only, the paper uses 2)",
        range=Range(1),
    )
    num_buckets: int = option(
        32,
        "relative-position buckets of the decoder self-attention (section 2.3; the paper's 32)",
        range=Range(2),
    )
    relative_max_distance: int = option(
        128,
        "distances >= this share the last relative-position bucket; must exceed --num-buckets // 2 "
        "(the paper's 128)",
    )


def validate_prophetnet_args(args, src_dict, tgt_dict) -> None:
    """Refuse out-of-range options and values the model cannot honour together."""
    check_config(args, ProphetNetConfig)
    ngram, buckets, distance = args.ngram, args.num_buckets, args.relative_max_distance
    require(
        ngram <= args.max_target_positions,
        f"--ngram {ngram} is larger than the decoder's positions table (--max-target-positions "
        f"{args.max_target_positions}); use a smaller --ngram",
    )
    require(
        distance > buckets // 2,
        f"--relative-max-distance must be larger than --num-buckets // 2 = {buckets // 2} (the "
        f"paper uses 128 with 32 buckets), got {distance}",
    )
    require(
        args.encoder_embed_dim == args.decoder_embed_dim,
        f"prophetnet shares its embeddings, so --encoder-embed-dim ({args.encoder_embed_dim}) must "
        f"equal --decoder-embed-dim ({args.decoder_embed_dim})",
    )
    for side in ("encoder", "decoder"):
        dim, heads = getattr(args, f"{side}_embed_dim"), getattr(args, f"{side}_attention_heads")
        require(
            heads >= 1 and dim % heads == 0,
            f"--{side}-embed-dim {dim} must be a multiple of --{side}-attention-heads {heads}",
        )
    check_attention_backend(option_value(args, "attention_backend"))
    require(
        src_dict == tgt_dict,
        "prophetnet shares one embedding table between encoder, decoder and output layer (as in "
        "the paper), so source and target need one dictionary: binarize with fairseq-preprocess "
        "--joined-dictionary (or --srcdict with the target dictionary)",
    )


class ProphetNetDecoder(FairseqIncrementalDecoder):
    """Decoder with a main stream and ``args.ngram`` predicting streams."""

    def __init__(self, args, dictionary, embed_tokens: nn.Embedding):
        super().__init__(dictionary)
        self.ngram = args.ngram
        self.num_buckets = args.num_buckets
        self.relative_max_distance = args.relative_max_distance
        self.max_target_positions = args.max_target_positions
        self.attention_backend = option_value(args, "attention_backend")
        self.padding_idx = embed_tokens.padding_idx
        embed_dim = embed_tokens.embedding_dim
        self.embed_tokens = embed_tokens
        self.embed_scale = 1.0 if args.no_scale_embedding else math.sqrt(embed_dim)
        # Rows padding_idx + 1 .. padding_idx + max_target_positions hold the input tokens'
        # positions; one more row holds the last predicting stream's position (one further).
        self.embed_positions = nn.Embedding(
            args.max_target_positions + self.padding_idx + 2,
            embed_dim,
            padding_idx=self.padding_idx,
        )
        self.ngram_embeddings = nn.Embedding(self.ngram, embed_dim)
        self.layernorm_embedding = LayerNorm(embed_dim)
        self.dropout_module = FairseqDropout(args.dropout, module_name=self.__class__.__name__)
        self.layers = nn.ModuleList(
            [ProphetNetDecoderLayer(args, embed_dim) for _ in range(args.decoder_layers)]
        )
        self._fixed_tables: Dict[torch.device, NgramStreamTables] = {}

    def _tables(self, device) -> NgramStreamTables:
        """``masking.NgramStreamTables`` at ``--max-target-positions``, once per device."""
        device = torch.device(device)
        tables = self._fixed_tables.get(device)
        if tables is None:
            sizes = (self.max_target_positions, self.ngram, self.num_buckets)
            tables = NgramStreamTables(*sizes, self.relative_max_distance, device)
            self._fixed_tables[device] = tables
        return tables

    def _self_attention_mask(self, length: int, device) -> Union[Tensor, NgramStreamBlockMask]:
        """The folded key mask, or the rule's block mask with ``--attention-backend flex``."""
        if self.attention_backend == "flex":
            return NgramStreamBlockMask(length, self.ngram, device)
        return self._tables(device).key_mask(length)

    def forward(
        self,
        prev_output_tokens: Tensor,
        encoder_out: Optional[Dict[str, List[Tensor]]] = None,
        incremental_state: Optional[IncrementalState] = None,
        features_only: bool = False,
        decoder_positions: Optional[Tensor] = None,
        **unused,
    ):
        """Stream-1 logits ``(B, T, V)`` and ``extra``; a full pass adds every stream's logits
        as ``extra["stream_logits"]``."""
        streams = self.extract_features(
            prev_output_tokens, encoder_out, incremental_state, decoder_positions
        )
        extra = {"attn": [None], "inner_states": None}
        if features_only:
            return streams[0], extra
        logits = [self.output_layer(s) for s in streams]
        if incremental_state is None:
            extra["stream_logits"] = logits
        return logits[0], extra

    def extract_features(
        self,
        prev_output_tokens: Tensor,
        encoder_out: Optional[Dict[str, List[Tensor]]] = None,
        incremental_state: Optional[IncrementalState] = None,
        decoder_positions: Optional[Tensor] = None,
    ) -> List[Tensor]:
        """Final states of the predicting streams (incrementally stream 1 of the newest token,
        the main stream's keys/values cached); the last layer computes the predicting rows only."""
        enc, enc_mask = None, None
        if encoder_out is not None:
            enc = encoder_out["encoder_out"][0]
            if encoder_out.get("encoder_padding_mask"):
                enc_mask = encoder_out["encoder_padding_mask"][0]
        if incremental_state is None:
            rows, buckets, key_mask, first = self._rows(prev_output_tokens, decoder_positions)
        else:
            rows, buckets, key_mask, first = self._step_rows(prev_output_tokens)
        x = self.dropout_module(self.layernorm_embedding(torch.cat(rows, dim=1))).transpose(0, 1)
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            if i == last:
                buckets, key_mask = buckets[..., first:, :], key_mask[first:]
            x = layer(
                x, enc, enc_mask, buckets, key_mask, incremental_state, predicting_only=i == last
            )
        x = x.transpose(0, 1)
        return [x[:, k * first : (k + 1) * first] for k in range(x.size(1) // first)]

    def _rows(self, prev_output_tokens: Tensor, decoder_positions: Optional[Tensor]) -> tuple:
        """A full pass's input rows ``[main, stream 1, ..., stream n]``, buckets, key mask and
        length."""
        length = prev_output_tokens.size(1)
        require(
            length <= self.max_target_positions,
            f"a decoder input of {length} tokens is longer than --max-target-positions "
            f"{self.max_target_positions}; raise it or filter long targets",
        )
        device = prev_output_tokens.device
        if decoder_positions is None:
            positions = utils.make_positions(prev_output_tokens, self.padding_idx)
            buckets = self._tables(device).numbered_buckets(length)
        else:
            positions = decoder_positions
            buckets = ngram_stream_buckets(
                positions, self.ngram, self.num_buckets, self.relative_max_distance
            )
        tokens = self.embed_scale * self.embed_tokens(prev_output_tokens)
        ahead = self.embed_positions(positions + 1)
        rows = [tokens + self.embed_positions(positions)]
        rows += [ahead + self.ngram_embeddings.weight[k] for k in range(self.ngram)]
        return rows, buckets, self._self_attention_mask(length, device), length

    def _step_rows(self, prev_output_tokens: Tensor) -> tuple:
        """The newest token's rows ``[main, stream 1]``, buckets, key mask and 1."""
        step = prev_output_tokens.size(1) - 1
        require(
            step < self.max_target_positions,
            f"decoding step {step + 1} is beyond --max-target-positions "
            f"{self.max_target_positions}",
        )
        position = self.padding_idx + 1 + step
        pos = self.embed_positions.weight[position : position + 2]
        main = self.embed_scale * self.embed_tokens(prev_output_tokens[:, -1:]) + pos[0]
        ahead = (pos[1] + self.ngram_embeddings.weight[0]).expand_as(main)
        return [main, ahead], *self._tables(prev_output_tokens.device).step(step), 1

    def output_layer(self, features: Tensor) -> Tensor:
        return F.linear(features, self.embed_tokens.weight)  # shared, as build_model sets

    def max_positions(self) -> int:
        return self.max_target_positions


@register_model("prophetnet")
class ProphetNetModel(ConfiguredModel, TransformerModel):
    """Encoder-decoder with n-stream self-attention and future n-gram prediction."""

    options_config = ProphetNetConfig

    # Fine-tuning must keep pre-training's --ngram and positions: they are weight shapes.
    shape_options = (
        ("decoder.ngram_embeddings.weight", "--ngram"),
        ("self_attn.relative_pos_proj.weight", "--num-buckets (or --decoder-attention-heads)"),
        ("self_attn.relative_pos_proj.bias", "--num-buckets (or --decoder-attention-heads)"),
        ("encoder.embed_positions.weight", "--max-source-positions"),
        ("decoder.embed_positions.weight", "--max-target-positions"),
    )

    @classmethod
    def build_model(cls, args, task):
        prophetnet_architecture(args)
        src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
        validate_prophetnet_args(args, src_dict, tgt_dict)
        args.share_decoder_input_output_embed = True
        embed_tokens = cls.build_embedding(
            args, src_dict, args.encoder_embed_dim, args.encoder_embed_path
        )
        encoder = TransformerEncoder(args, src_dict, embed_tokens)
        decoder = ProphetNetDecoder(args, tgt_dict, embed_tokens)
        model = cls(args, encoder, decoder)
        model.apply(init_bert_params)
        return model

    def forward(self, src_tokens, src_lengths, prev_output_tokens, **kwargs):
        """The decoder's output (``decoder_positions``, ``features_only``: its options)."""
        encoder_out = self.encoder(src_tokens, src_lengths=src_lengths)
        return self.decoder(prev_output_tokens, encoder_out=encoder_out, **kwargs)


@register_model_architecture("prophetnet", "prophetnet_base")
@register_model_architecture("prophetnet", "prophetnet")
def prophetnet_architecture(args):
    """``ProphetNetConfig``'s defaults and ProphetNet's choices on fairseq's Transformer."""
    fill_defaults(args, ProphetNetConfig)
    set_sizes(args, layers=6, embed_dim=768, ffn_embed_dim=3072, attention_heads=12)
    set_unset(
        args,
        max_source_positions=1024,
        max_target_positions=1024,  # fairseq's, as the tasks set it
        dropout=0.1,
        attention_dropout=0.1,
        activation_dropout=0.1,
        activation_fn="gelu",
    )
    for flag in (
        "encoder_learned_pos",
        "decoder_learned_pos",
        "layernorm_embedding",
        "no_scale_embedding",
        "share_all_embeddings",
        "share_decoder_input_output_embed",
    ):
        setattr(args, flag, True)
    base_architecture(args)


@register_model_architecture("prophetnet", "prophetnet_large")
def prophetnet_large(args):
    """The paper's size (section 3.1)."""
    set_sizes(args, layers=12, embed_dim=1024, ffn_embed_dim=4096, attention_heads=16)
    prophetnet_architecture(args)


@register_model_architecture("prophetnet", "prophetnet_tiny")
def prophetnet_tiny(args):
    """Tests and the CPU Gigaword example."""
    set_sizes(args, layers=3, embed_dim=256, ffn_embed_dim=1024, attention_heads=4)
    prophetnet_architecture(args)

"""HI-CMLM: CMLM whose masked decoder slots mix [MASK] with a soft copy of the source
embedding (Wang et al. 2021, "HI-CMLM: Improve CMLM with Hybrid Decoder Input").

The model is fairseq's ``CMLMNATransformerModel`` with one change of script: the decoder
input. Two methods of fairseq's NAT decoder are overridden, nothing else:

* ``forward_copying_source`` computes Z by the paper's relative-position soft copy
  (eq. 8-10, ``masking.soft_copy``) instead of fairseq's uniform hard copy;
* ``forward_embedding`` mixes M and Z at the masked (``<unk>``) slots by the chosen strategy
  (``masking.mix_decoder_input``); the mixed input then gets the decoder's position
  embedding as usual.

The decoder does this at every call, so mask-predict re-applies the hybrid input to every
re-masked slot at each iteration. ``all_mask`` takes fairseq's own code path and is
exactly ``cmlm_transformer``.
"""
from __future__ import annotations

import torch.nn.functional as F
from fairseq.models import register_model, register_model_architecture
from fairseq.models.nat import CMLMNATransformerModel
from fairseq.models.nat.cmlm_transformer import cmlm_base_architecture
from fairseq.models.nat.fairseq_nat_model import ensemble_decoder
from fairseq.models.nat.nonautoregressive_transformer import NATransformerDecoder
from fairseq.modules.transformer_sentence_encoder import init_bert_params

from fairseq_ext.errors import require
from fairseq_ext.masking import HYBRID_STRATEGIES, mix_decoder_input, soft_copy
from fairseq_ext.models.compat import CheckpointShapeCheckMixin
from fairseq_ext.modules import add_straight_through_args, apply_straight_through_from_args

# fairseq's NAT length predictor has 256 classes: a target (with <s> and </s>) may have at
# most 255 tokens. Longer targets would be silently clamped, so the task refuses them.
MAX_NAT_TARGET_LENGTH = 255


def validate_hybrid_args(args) -> None:
    """Clear errors for out-of-range HI-CMLM options."""
    strategy = getattr(args, "hybrid_strategy", "fence_replace")
    require(strategy in HYBRID_STRATEGIES,
            f"--hybrid-strategy {strategy!r} is unknown; choose one of {', '.join(HYBRID_STRATEGIES)}")
    tau = getattr(args, "copy_temperature", 0.2)
    require(tau > 0, f"--copy-temperature must be > 0 (the paper uses 0.2), got {tau}")
    w = getattr(args, "mask_weight", 0.6)
    require(0.0 <= w <= 1.0, f"--mask-weight must be in [0, 1] (the paper's best is 0.6), got {w}")
    if strategy != "all_mask":
        require(args.encoder_embed_dim == args.decoder_embed_dim,
                f"--hybrid-strategy {strategy} copies source embeddings into the decoder, so "
                f"--encoder-embed-dim ({args.encoder_embed_dim}) must equal --decoder-embed-dim "
                f"({args.decoder_embed_dim})")


class HybridInputDecoder(NATransformerDecoder):
    """fairseq's NAT decoder whose masked input slots take M, Z or a mix of both."""

    def __init__(self, args, dictionary, embed_tokens, no_encoder_attn=False):
        super().__init__(args, dictionary, embed_tokens, no_encoder_attn=no_encoder_attn)
        self.hybrid_strategy = getattr(args, "hybrid_strategy", "fence_replace")
        self.copy_temperature = getattr(args, "copy_temperature", 0.2)
        self.mask_weight = getattr(args, "mask_weight", 0.6)

    @property
    def uses_source_copy(self) -> bool:
        return self.hybrid_strategy != "all_mask"

    @ensemble_decoder
    def forward(self, normalize, encoder_out, prev_output_tokens, step=0, **unused):
        features, _ = self.extract_features(
            prev_output_tokens, encoder_out=encoder_out, embedding_copy=self.uses_source_copy
        )
        logits = self.output_layer(features)
        return F.log_softmax(logits, -1) if normalize else logits

    def forward_copying_source(self, src_embeds, src_masks, tgt_masks):
        """Z: the relative-position soft copy of the source token embeddings (eq. 8-10)."""
        return soft_copy(src_embeds, src_masks, tgt_masks, self.copy_temperature)

    def forward_embedding(self, prev_output_tokens, states=None):
        """With ``states`` (= Z) given, mix it into the masked slots; then add positions."""
        if states is None:
            return super().forward_embedding(prev_output_tokens)
        x = self.embed_scale * self.embed_tokens(prev_output_tokens)
        if self.project_in_dim is not None:
            x = self.project_in_dim(x)
        mixed = mix_decoder_input(x, states.to(x.dtype), prev_output_tokens.eq(self.unk),
                                  self.hybrid_strategy, self.mask_weight)
        return super().forward_embedding(prev_output_tokens, states=mixed)


@register_model("hi_cmlm_transformer")
class HiCMLMTransformerModel(CheckpointShapeCheckMixin, CMLMNATransformerModel):
    """CMLM with a hybrid decoder input (``--hybrid-strategy``)."""

    shape_options = (("encoder.embed_positions.weight", "--max-source-positions"),
                     ("decoder.embed_positions.weight", "--max-target-positions"))

    @staticmethod
    def add_args(parser):
        CMLMNATransformerModel.add_args(parser)
        parser.add_argument("--hybrid-strategy", choices=HYBRID_STRATEGIES,
                            help="what a masked decoder slot gets: M, Z, 0.6M+0.4Z or the fence")
        parser.add_argument("--copy-temperature", type=float,
                            help="tau of the relative-position soft copy, > 0 (eq. 9)")
        parser.add_argument("--mask-weight", type=float,
                            help="weight of M for weighted_sum, in [0, 1]")
        add_straight_through_args(parser)

    @classmethod
    def build_model(cls, args, task):
        validate_hybrid_args(args)
        model = super().build_model(args, task)
        apply_straight_through_from_args(model, args)
        return model

    @classmethod
    def build_decoder(cls, args, tgt_dict, embed_tokens):
        decoder = HybridInputDecoder(args, tgt_dict, embed_tokens)
        if getattr(args, "apply_bert_init", False):
            decoder.apply(init_bert_params)
        return decoder

    def max_positions(self):
        enc, dec = super().max_positions()
        return enc, min(dec, MAX_NAT_TARGET_LENGTH)


def _hybrid_defaults(args) -> None:
    args.hybrid_strategy = getattr(args, "hybrid_strategy", None) or "fence_replace"
    args.copy_temperature = getattr(args, "copy_temperature", None)
    if args.copy_temperature is None:
        args.copy_temperature = 0.2
    args.mask_weight = getattr(args, "mask_weight", None)
    if args.mask_weight is None:
        args.mask_weight = 0.6
    args.attention_dropout_straight_through = getattr(args, "attention_dropout_straight_through", False)


@register_model_architecture("hi_cmlm_transformer", "hi_cmlm_transformer")
def hi_cmlm_base_architecture(args):
    """fairseq's CMLM base sizes: 6+6 layers, 512 dims, 8 heads, FFN 2048, shared embeddings."""
    _hybrid_defaults(args)
    cmlm_base_architecture(args)


@register_model_architecture("hi_cmlm_transformer", "hi_cmlm_transformer_wmt_en_de")
def hi_cmlm_wmt_en_de(args):
    """The paper's WMT setting (section 4.1): base sizes, trained with lr 5e-4, 20k warm-up."""
    hi_cmlm_base_architecture(args)


@register_model_architecture("hi_cmlm_transformer", "hi_cmlm_transformer_tiny")
def hi_cmlm_tiny_architecture(args):
    """3+3 layers x 192 dims, 4 heads, FFN 768: for tests and the CPU quickstart."""
    for side in ("encoder", "decoder"):
        setattr(args, f"{side}_layers", getattr(args, f"{side}_layers", 3))
        setattr(args, f"{side}_embed_dim", getattr(args, f"{side}_embed_dim", 192))
        setattr(args, f"{side}_ffn_embed_dim", getattr(args, f"{side}_ffn_embed_dim", 768))
        setattr(args, f"{side}_attention_heads", getattr(args, f"{side}_attention_heads", 4))
    hi_cmlm_base_architecture(args)

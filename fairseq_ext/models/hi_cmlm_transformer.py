"""``hi_cmlm_transformer``: fairseq's CMLM whose masked decoder slots get [MASK] (M), a soft copy
of the source embeddings by relative position (Z, eq. 8-10) or a mix (Wang et al. 2021, sections
3.2-3.3); ``--hybrid-strategy all_mask --train-copy-share 0`` is ``cmlm_transformer``."""

from contextlib import contextmanager
from dataclasses import dataclass

import torch.nn.functional as F
from fairseq.dataclass import ChoiceEnum
from fairseq.models import register_model, register_model_architecture
from fairseq.models.nat import CMLMNATransformerModel
from fairseq.models.nat.cmlm_transformer import cmlm_base_architecture
from fairseq.models.nat.fairseq_nat_model import ensemble_decoder
from fairseq.models.nat.nonautoregressive_transformer import NATransformerDecoder
from fairseq.modules.transformer_sentence_encoder import init_bert_params

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
from fairseq_ext.masking import (
    FENCE_FIRST,
    HYBRID_STRATEGIES,
    PAPER_MASK_WEIGHT,
    TRAINING_INPUTS,
    decoding_copies_source,
    mix_decoder_input,
    soft_copy,
    source_copy_weight,
    training_copy_weight,
)
from fairseq_ext.models.decoding_call import call_option
from fairseq_ext.models.shared_options import ConfiguredModel, StraightThroughConfig
from fairseq_ext.modules import apply_straight_through_from_args

UNIT = Range(0, 1)


@dataclass
class HiCMLMConfig(StraightThroughConfig):
    hybrid_strategy: ChoiceEnum(HYBRID_STRATEGIES) = option(
        "fence_replace",
        "what a masked decoder slot gets at each mask-predict pass (section 3.2): M, Z, "
        "mask_weight M + (1 - mask_weight) Z, or the fence (the paper's choice)",
    )
    copy_temperature: float = option(
        0.2,
        "tau of the relative-position soft copy Z (eq. 9; the paper's 0.2)",
        range=Range(0, low_open=True),
    )
    mask_weight: float = option(
        PAPER_MASK_WEIGHT,
        f"weight of M for weighted_sum (section 3.2; the paper's best {PAPER_MASK_WEIGHT})",
        range=UNIT,
    )
    fence_first: ChoiceEnum(FENCE_FIRST) = option(
        FENCE_FIRST[0],
        "what the first target word gets under fence_replace: mask (the paper's fence "
        "(0,1,0,1,...), section 3.2) or copy",
    )
    train_decoder_input: ChoiceEnum(TRAINING_INPUTS) = option(
        "paper",
        "training input of the masked slots: paper (section 3.3: a random --train-copy-share of "
        "them gets Z, for every strategy) or decoding_rule (the strategy's decoding input; an "
        "ablation the paper does not run)",
    )
    train_copy_share: float = option(
        0.5,
        "with --train-decoder-input paper, the probability that a masked training slot gets Z "
        "instead of M (section 3.3 gives none; 0.5 trains on as much Z as fence_replace feeds the "
        "first pass); 0 with --hybrid-strategy all_mask is fairseq's cmlm_transformer",
        range=UNIT,
    )


# fairseq's NAT length predictor has 256 classes: a target (with <s> and </s>) may have at
# most 255 tokens. Longer targets would be silently clamped, so the task refuses them.
MAX_NAT_TARGET_LENGTH = 255


def validate_hybrid_args(args) -> None:
    """Clear errors for out-of-range HI-CMLM options and a copy between unequal embeddings."""
    check_config(args, HiCMLMConfig)
    if uses_source_copy(args):
        require(
            args.encoder_embed_dim == args.decoder_embed_dim,
            f"--hybrid-strategy {option_value(args, 'hybrid_strategy')} with --train-decoder-input "
            f"{option_value(args, 'train_decoder_input')} and --train-copy-share "
            f"{args.train_copy_share} copies source embeddings into the decoder, so "
            f"--encoder-embed-dim ({args.encoder_embed_dim}) must equal --decoder-embed-dim "
            f"({args.decoder_embed_dim})",
        )


def trains_with_source_copy(args) -> bool:
    """Whether any training slot can get Z."""
    if option_value(args, "train_decoder_input") == "paper":
        return args.train_copy_share > 0
    return decoding_copies_source(option_value(args, "hybrid_strategy"))


def uses_source_copy(args) -> bool:
    """Whether training or decoding ever gives a slot Z."""
    return trains_with_source_copy(args) or decoding_copies_source(
        option_value(args, "hybrid_strategy")
    )


class HybridInputDecoder(NATransformerDecoder):
    """fairseq's NAT decoder whose masked input slots take M, Z or a mix of both."""

    def __init__(self, args, dictionary, embed_tokens, no_encoder_attn=False):
        super().__init__(args, dictionary, embed_tokens, no_encoder_attn=no_encoder_attn)
        self.hybrid_strategy = option_value(args, "hybrid_strategy")
        self.copy_temperature = args.copy_temperature
        self.mask_weight = args.mask_weight
        self.fence_first = option_value(args, "fence_first")
        self.length_offset = 0  # set by cmlm_hybrid's generator (--length-offset)
        self.length_offset_ramp = 0  # and --length-offset-ramp
        self._training = False
        self._training_copy_weight = None

    @contextmanager
    def training_input(self, copy_weight):
        """Within the block, masked slots get ``copy_weight`` (``(B, T)``; None: M everywhere)."""
        self._training, self._training_copy_weight = True, copy_weight
        try:
            yield
        finally:
            self._training, self._training_copy_weight = False, None

    def forward_length_prediction(self, length_out, encoder_out, tgt_tokens=None):
        """fairseq's predicted lengths plus ``--length-offset`` (or the call's) at decoding, one
        token nearer 0 for each token (between ``<s>`` and ``</s>``) a length has fewer than
        ``--length-offset-ramp``."""
        lengths = super().forward_length_prediction(length_out, encoder_out, tgt_tokens)
        offset = call_option("length_offset", self.length_offset)
        if tgt_tokens is not None or not offset:
            return lengths
        ramp = call_option("length_offset_ramp", self.length_offset_ramp)
        short_by = (ramp + 2 - lengths).clamp(min=0)
        return lengths + (abs(offset) - short_by).clamp(min=0) * (1 if offset > 0 else -1)

    def copies_source(self) -> bool:
        """Whether this call can give a slot Z (else fairseq's own embedding path runs)."""
        if self._training:
            return self._training_copy_weight is not None
        return decoding_copies_source(call_option("strategy", self.hybrid_strategy))

    def copy_weight(self, prev_output_tokens):
        """Weight of Z per slot: the training input in ``training_input``, else the strategy's."""
        if self._training:
            return self._training_copy_weight
        return source_copy_weight(
            prev_output_tokens.eq(self.unk),
            call_option("strategy", self.hybrid_strategy),
            self.mask_weight,
            self.fence_first,
        )

    @ensemble_decoder
    def forward(self, normalize, encoder_out, prev_output_tokens, step=0, **unused):
        features, _ = self.extract_features(
            prev_output_tokens, encoder_out=encoder_out, embedding_copy=self.copies_source()
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
        mixed = mix_decoder_input(x, states.to(x.dtype), self.copy_weight(prev_output_tokens))
        return super().forward_embedding(prev_output_tokens, states=mixed)


@register_model("hi_cmlm_transformer")
class HiCMLMTransformerModel(ConfiguredModel, CMLMNATransformerModel):
    """CMLM with a hybrid decoder input (``--hybrid-strategy``)."""

    options_config = HiCMLMConfig

    shape_options = (
        ("encoder.embed_positions.weight", "--max-source-positions"),
        ("decoder.embed_positions.weight", "--max-target-positions"),
    )

    @classmethod
    def build_model(cls, args, task):
        validate_hybrid_args(args)
        model = super().build_model(args, task)
        apply_straight_through_from_args(model, args)
        return model

    def __init__(self, args, encoder, decoder):
        super().__init__(args, encoder, decoder)
        self.train_decoder_input = option_value(args, "train_decoder_input")
        self.train_copy_share = args.train_copy_share
        self.trains_with_copy = trains_with_source_copy(args)

    def forward(self, src_tokens, src_lengths, prev_output_tokens, tgt_tokens, **kwargs):
        """The loss forward: CMLM's, with the training input of ``--train-decoder-input``."""
        d = self.decoder
        weight = None
        if self.trains_with_copy:
            weight = training_copy_weight(
                prev_output_tokens.eq(self.unk),
                self.train_decoder_input,
                self.train_copy_share,
                d.hybrid_strategy,
                d.mask_weight,
                d.fence_first,
            )
        with d.training_input(weight):
            return super().forward(
                src_tokens, src_lengths, prev_output_tokens, tgt_tokens, **kwargs
            )

    @classmethod
    def build_decoder(cls, args, tgt_dict, embed_tokens):
        decoder = HybridInputDecoder(args, tgt_dict, embed_tokens)
        if getattr(args, "apply_bert_init", False):
            decoder.apply(init_bert_params)
        return decoder

    def max_positions(self):
        enc, dec = super().max_positions()
        return enc, min(dec, MAX_NAT_TARGET_LENGTH)


# _wmt_en_de: the paper's WMT setting (section 4.1), base sizes trained with lr 5e-4, 20k warm-up
@register_model_architecture("hi_cmlm_transformer", "hi_cmlm_transformer_wmt_en_de")
@register_model_architecture("hi_cmlm_transformer", "hi_cmlm_transformer")
def hi_cmlm_base_architecture(args):
    """``HiCMLMConfig``'s defaults on fairseq's CMLM base sizes (6+6 layers, 512 dims)."""
    fill_defaults(args, HiCMLMConfig)
    cmlm_base_architecture(args)


@register_model_architecture("hi_cmlm_transformer", "hi_cmlm_transformer_tiny")
def hi_cmlm_tiny_architecture(args):
    """3+3 layers x 192 dims, 4 heads, FFN 768: for tests and the CPU quickstart."""
    set_sizes(args, layers=3, embed_dim=192, ffn_embed_dim=768, attention_heads=4)
    hi_cmlm_base_architecture(args)


@register_model_architecture("hi_cmlm_transformer", "hi_cmlm_transformer_tiny_deep_shallow")
def hi_cmlm_tiny_deep_shallow_architecture(args):
    """6 encoder layers, 1 decoder layer, 192 dims (Kasai et al. 2021, section 3)."""
    set_unset(args, encoder_layers=6, decoder_layers=1)
    set_sizes(args, layers=6, embed_dim=192, ffn_embed_dim=768, attention_heads=4)
    hi_cmlm_base_architecture(args)

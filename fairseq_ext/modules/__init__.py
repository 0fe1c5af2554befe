"""The ``nn.Module`` blocks the models share: masked attention with a cache, ProphetNet's
n-stream attention and decoder layer, straight-through attention dropout."""

from fairseq_ext.modules.masked_attention import MaskedSelfAttention, MaskedTransformerLayer
from fairseq_ext.modules.ngram_self_attention import NgramSelfAttention
from fairseq_ext.modules.prophetnet_decoder_layer import ProphetNetDecoderLayer
from fairseq_ext.modules.straight_through_dropout import (
    StraightThroughDropout,
    StraightThroughDropoutFunction,
    apply_straight_through_from_args,
    straight_through_dropout,
    use_straight_through_attention_dropout,
)

__all__ = [
    "MaskedSelfAttention",
    "MaskedTransformerLayer",
    "NgramSelfAttention",
    "ProphetNetDecoderLayer",
    "StraightThroughDropout",
    "StraightThroughDropoutFunction",
    "apply_straight_through_from_args",
    "straight_through_dropout",
    "use_straight_through_attention_dropout",
]

"""``nn.Module`` building blocks and autograd functions shared by the plugin's models.

Layering: ``models`` import these modules, these modules import ``masking`` (the rules), and
nothing here imports a task or a model."""
from fairseq_ext.modules.masked_attention import MaskedSelfAttention, MaskedTransformerLayer
from fairseq_ext.modules.ngram_self_attention import NgramSelfAttention
from fairseq_ext.modules.prophetnet_decoder_layer import ProphetNetDecoderLayer
from fairseq_ext.modules.straight_through_dropout import (
    StraightThroughDropout,
    StraightThroughDropoutFunction,
    add_straight_through_args,
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
    "add_straight_through_args",
    "apply_straight_through_from_args",
    "straight_through_dropout",
    "use_straight_through_attention_dropout",
]

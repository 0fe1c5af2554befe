"""``nn.Module`` building blocks shared by the plugin's models (see ../shared/DESIGN.md: models
import these, these import ``masking``)."""
from fairseq_ext.modules.masked_attention import MaskedSelfAttention, MaskedTransformerLayer
from fairseq_ext.modules.ngram_self_attention import NgramSelfAttention
from fairseq_ext.modules.prophetnet_decoder_layer import ProphetNetDecoderLayer

__all__ = ["MaskedSelfAttention", "MaskedTransformerLayer", "NgramSelfAttention", "ProphetNetDecoderLayer"]

"""nn.Modules shared by the plugin's models (see ../shared/DESIGN.md, "Layers")."""
from fairseq_ext.modules.masked_attention import (
    MaskedSelfAttention,
    MaskedTransformerLayer,
    additive_attention_mask,
)

__all__ = ["MaskedSelfAttention", "MaskedTransformerLayer", "additive_attention_mask"]

"""The ``nn.Module`` blocks the models share: masked attention with a cache, ProphetNet's
n-stream attention and decoder layer, straight-through attention dropout."""

from fairseq_ext.modules.masked_attention import (  # noqa: F401
    MaskedSelfAttention,
    MaskedTransformerLayer,
)
from fairseq_ext.modules.ngram_self_attention import (  # noqa: F401
    NgramSelfAttention,
    ProphetNetDecoderLayer,
)
from fairseq_ext.modules.straight_through_dropout import (  # noqa: F401
    StraightThroughDropout,
    StraightThroughDropoutFunction,
    apply_straight_through_from_args,
    straight_through_dropout,
    use_straight_through_attention_dropout,
)

"""The options ``prophetnet`` adds to fairseq's Transformer (Qi et al. 2020, section 2.3)."""

from dataclasses import dataclass

from fairseq_ext.common.config_fields import Range, option
from fairseq_ext.models.shared_options import AttentionBackendConfig


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

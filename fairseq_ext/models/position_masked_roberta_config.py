"""The options ``position_masked_roberta`` adds to RoBERTa (Wagner et al. 2020)."""

from dataclasses import dataclass

from fairseq_ext.models.shared_options import LayerNormEpsConfig, StraightThroughConfig


@dataclass
class PositionMaskedRobertaConfig(StraightThroughConfig, LayerNormEpsConfig):
    pass

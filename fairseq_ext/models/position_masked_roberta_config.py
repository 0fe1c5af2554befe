"""The options ``position_masked_roberta`` adds to fairseq's RoBERTa (Wagner et al. 2020,
"Positional Masking for Language Models"): the straight-through attention dropout of section
2.2 and the layer-norm epsilon of a converted BERT checkpoint."""

from dataclasses import dataclass

from fairseq_ext.models.shared_options import LayerNormEpsConfig, StraightThroughConfig


@dataclass
class PositionMaskedRobertaConfig(StraightThroughConfig, LayerNormEpsConfig):
    pass

"""The options of ``hi_cmlm_transformer`` (Wang et al. 2021, sections 3.2-3.3, eq. 9)."""

from dataclasses import dataclass

from fairseq.dataclass import ChoiceEnum

from fairseq_ext.common.config_fields import Range, option
from fairseq_ext.masking import FENCE_FIRST, HYBRID_STRATEGIES, PAPER_MASK_WEIGHT, TRAINING_INPUTS
from fairseq_ext.models.shared_options import StraightThroughConfig

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

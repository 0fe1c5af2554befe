# No "from __future__ import annotations" here: fairseq reads the dataclass field types at run time.
"""``position_masked_lm``: masked LM cross-entropy plus ``--position-loss-weight`` times the
position classifier's (Wagner et al. 2020, section 2.1), each a mean per predicted token."""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from fairseq import modules, utils
from fairseq.criterions import register_criterion
from fairseq.criterions.masked_lm import MaskedLmConfig, MaskedLmLoss
from fairseq.logging import metrics

from fairseq_ext.common.config_fields import Range, check_config, option
from fairseq_ext.common.errors import require
from fairseq_ext.common.interfaces import PositionMaskingTask
from fairseq_ext.data import NO_POSITION_LABEL


@dataclass
class PositionMaskedLMCriterionConfig(MaskedLmConfig):
    position_loss_weight: float = option(
        1.0,
        "weight of the position cross-entropy added to the MLM cross-entropy (section 2.1)",
        range=Range(0, finite=True),
    )


# (logged name, summed key, the size it is divided by): losses in bits, accuracies in percent
LOGGED = (
    ("loss", "loss", "sample_size"),
    ("mlm_loss", "mlm_loss", "sample_size"),
    ("mlm_accuracy", "mlm_correct", "sample_size"),
    ("position_loss", "position_loss", "position_sample_size"),
    ("position_accuracy", "position_correct", "position_sample_size"),
)


@register_criterion("position_masked_lm", dataclass=PositionMaskedLMCriterionConfig)
class PositionMaskedLMLoss(MaskedLmLoss):
    """fairseq's masked LM loss plus the weighted position classification loss."""

    def __init__(self, cfg: PositionMaskedLMCriterionConfig, task):
        super().__init__(cfg, task)
        check_config(cfg, PositionMaskedLMCriterionConfig)
        require(
            isinstance(task, PositionMaskingTask),
            "--criterion position_masked_lm needs --task position_masked_lm (it reads the "
            "masked positions from the batch)",
        )
        self.position_loss_weight = cfg.position_loss_weight

    def forward(self, model, sample, reduce=True):
        masked_tokens = sample["target"].ne(self.padding_idx)
        sample_size = masked_tokens.int().sum()
        if self.tpu:
            masked_tokens = None
        elif masked_tokens.device == torch.device("cpu"):
            if not masked_tokens.any():
                masked_tokens = None
        else:
            masked_tokens = torch.where(
                masked_tokens.any(), masked_tokens, masked_tokens.new([True])
            )

        position_target = sample["position_target"]
        masked_positions = position_target.ne(NO_POSITION_LABEL)
        logits, extra = model(
            **sample["net_input"], masked_tokens=masked_tokens, masked_positions=masked_positions
        )
        require(
            "position_logits" in extra,
            "--criterion position_masked_lm needs a model with a position classifier "
            "(--arch position_masked_roberta_*)",
        )
        targets = model.get_targets(sample, [logits])
        if masked_tokens is not None:
            targets = targets[masked_tokens]
        mlm_loss = modules.cross_entropy(
            logits.view(-1, logits.size(-1)),
            targets.view(-1),
            reduction="sum",
            ignore_index=self.padding_idx,
        )
        with torch.no_grad():
            hits = logits.argmax(-1).eq(targets)
            if masked_tokens is None:  # every token was projected: count the masked ones only
                hits &= targets.ne(self.padding_idx)
            mlm_correct = hits.sum()

        labels = position_target[masked_positions]
        n_position = labels.numel()
        loss = mlm_loss
        logging_output = {
            "ntokens": sample["ntokens"],
            "nsentences": sample["nsentences"],
            "sample_size": sample_size,
            "mlm_loss": mlm_loss.data,
            "mlm_correct": mlm_correct.data,
            "position_sample_size": n_position,
        }
        if n_position > 0:
            position_logits = extra["position_logits"]
            position_loss = F.cross_entropy(position_logits.float(), labels, reduction="sum")
            loss = mlm_loss + self.position_loss_weight * position_loss * (sample_size / n_position)
            logging_output["position_loss"] = position_loss.data
            with torch.no_grad():
                logging_output["position_correct"] = position_logits.argmax(-1).eq(labels).sum()
        logging_output["loss"] = loss if self.tpu else loss.data
        return loss, sample_size, logging_output

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        def total(key):
            return sum(log.get(key, 0) for log in logging_outputs)

        # the number of examples the batches covered: a whole split at validation
        metrics.log_scalar_sum("examples", total("nsentences"), priority=900)
        for name, key, size_key in LOGGED:
            size = total(size_key)
            if size == 0:
                continue
            if name.endswith("accuracy"):
                metrics.log_scalar(name, 100.0 * total(key) / size, size, round=2)
                continue
            metrics.log_scalar(name, total(key) / size / math.log(2), size, round=3)
            if name == "mlm_loss":
                metrics.log_derived(
                    "ppl", lambda meters: utils.get_perplexity(meters["mlm_loss"].avg)
                )

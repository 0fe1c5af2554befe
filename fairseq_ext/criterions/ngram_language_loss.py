# No "from __future__ import annotations" here: fairseq reads the dataclass field types at run time.
"""``ngram_language_loss``: ProphetNet's future n-gram loss (Qi et al. 2020, section 2.3, eq. 2),
label-smoothed cross-entropy of every predicting stream weighted by ``alpha_j``."""

import math
from argparse import Namespace
from dataclasses import dataclass
from typing import List

import torch
import torch.nn.functional as F
from fairseq import utils
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import label_smoothed_nll_loss
from fairseq.dataclass import FairseqDataclass
from fairseq.logging import metrics
from omegaconf import II

from fairseq_ext.common.config_fields import Range, check_config, option
from fairseq_ext.common.errors import require


@dataclass
class NgramLanguageLossConfig(FairseqDataclass):
    ngram_gamma: float = option(
        1.0,
        "attenuation gamma of the stream weights alpha_j = gamma^j / sum_i gamma^i (eq. 2; 1.0: "
        "equal weights, as in the paper)",
        range=Range(0, low_open=True, finite=True),
    )
    label_smoothing: float = option(
        0.0, "label smoothing epsilon", range=Range(0, 1, high_open=True)
    )
    disable_ngram_loss: bool = option(
        False,
        "train with the next-token stream only (the other streams are still computed and logged)",
    )
    sentence_avg: bool = II("optimization.sentence_avg")


def stream_weights(ngram: int, gamma: float) -> List[float]:
    """``alpha_j = gamma^j / sum_{i<n} gamma^i`` for ``j = 0 .. n-1`` (paper eq. 2)."""
    total = sum(gamma**i for i in range(ngram))
    return [gamma**j / total for j in range(ngram)]


@register_criterion("ngram_language_loss", dataclass=NgramLanguageLossConfig)
class NgramLanguageLoss(FairseqCriterion):
    def __init__(
        self,
        task,
        ngram_gamma: float = NgramLanguageLossConfig.ngram_gamma,
        label_smoothing: float = NgramLanguageLossConfig.label_smoothing,
        disable_ngram_loss: bool = NgramLanguageLossConfig.disable_ngram_loss,
        sentence_avg: bool = False,
    ):
        super().__init__(task)
        check_config(
            Namespace(ngram_gamma=ngram_gamma, label_smoothing=label_smoothing),
            NgramLanguageLossConfig,
        )
        self.gamma = ngram_gamma
        self.eps = label_smoothing
        self.disable_ngram_loss = disable_ngram_loss
        self.sentence_avg = sentence_avg

    def stream_targets(self, sample, ngram: int) -> List[torch.Tensor]:
        """Stream ``j + 1``'s target: the decoder's, minus the first ``j`` tokens of each span."""
        target = sample["target"]
        offset = sample.get("span_offset")
        if offset is None:
            return [target] * ngram
        return [target.masked_fill(offset < j, self.padding_idx) for j in range(ngram)]

    def forward(self, model, sample, reduce: bool = True):
        net_output = model(**sample["net_input"])
        streams = net_output[1].get("stream_logits")
        require(
            streams is not None,
            "criterion ngram_language_loss needs a model with predicting streams "
            "(--arch prophetnet*); use label_smoothed_cross_entropy for other models",
        )
        ntokens = sample["ntokens"]
        require(ntokens > 0, "a batch without target tokens; every target needs at least one token")
        ngram = len(streams)
        targets = self.stream_targets(sample, ngram)
        weights = [1.0] if self.disable_ngram_loss else stream_weights(ngram, self.gamma)
        loss = 0.0
        logging_output = {}
        for j, (logits, target) in enumerate(zip(streams, targets)):
            lprobs = F.log_softmax(logits.float(), dim=-1)
            stream_loss, stream_nll = label_smoothed_nll_loss(
                lprobs.view(-1, lprobs.size(-1)),
                target.reshape(-1),
                self.eps,
                ignore_index=self.padding_idx,
            )
            if j < len(weights):
                loss = loss + weights[j] * stream_loss
            scored = target.ne(self.padding_idx)
            correct = (lprobs.argmax(-1).eq(target) & scored).sum()
            logging_output[f"s{j + 1}_loss"] = stream_loss.data
            logging_output[f"s{j + 1}_correct"] = utils.item(correct.data)
            logging_output[f"s{j + 1}_count"] = utils.item(scored.sum().data)
            if j == 0:
                logging_output["nll_loss"] = stream_nll.data
        sample_size = sample["target"].size(0) if self.sentence_avg else ntokens
        logging_output.update(
            loss=loss.data,
            ntokens=ntokens,
            nsentences=sample["target"].size(0),
            sample_size=sample_size,
        )
        return loss, sample_size, logging_output

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        def total(key):
            return utils.item(sum(log.get(key, 0) for log in logging_outputs))

        sample_size, ntokens = total("sample_size"), total("ntokens")
        metrics.log_scalar("loss", total("loss") / sample_size / math.log(2), sample_size, round=3)
        metrics.log_scalar("nll_loss", total("nll_loss") / ntokens / math.log(2), ntokens, round=3)
        metrics.log_derived("ppl", lambda meters: utils.get_perplexity(meters["nll_loss"].avg))
        k = 1
        while any(f"s{k}_count" in log for log in logging_outputs):
            count = total(f"s{k}_count")
            if count > 0:
                metrics.log_scalar(
                    f"loss_s{k}", total(f"s{k}_loss") / count / math.log(2), count, round=3
                )
                metrics.log_scalar(
                    f"acc_s{k}", 100.0 * total(f"s{k}_correct") / count, count, round=2
                )
            k += 1

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True

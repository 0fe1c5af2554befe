# No "from __future__ import annotations" here: fairseq reads the dataclass field types at run time.
"""Task ``permutation_lm``: XLNet-style permutation language modelling on ``unilm_transformer``
(Su 2019, section "Permutation Language Model"): each training sequence in a random
factorisation order (``masking.random_order``), validation in the natural order; with
``--attention-mask causal`` a left-to-right LM."""

import logging
import os
from dataclasses import dataclass
from operator import attrgetter
from typing import Optional

from fairseq import utils
from fairseq.data import Dictionary, PrependTokenDataset, TokenBlockDataset, data_utils
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.tasks import FairseqTask, register_task
from omegaconf import II

from fairseq_ext.common.config_fields import Range, check_config, option
from fairseq_ext.common.errors import FairseqExtError, require
from fairseq_ext.common.interfaces import UniLMTask
from fairseq_ext.data.language_model_batches import language_model_batches
from fairseq_ext.data.mask_symbol import load_with_mask_symbol
from fairseq_ext.data.size_checks import (
    first_bad_row,
    refuse_empty_lines,
    refuse_long_lines,
    refuse_truncated_binaries,
)
from fairseq_ext.masking import ATTENTION_VARIANTS, random_order
from fairseq_ext.models.unilm_init import prepare_unilm_model
from fairseq_ext.tasks.base import PluginTask

logger = logging.getLogger(__name__)

BREAK_MODES = ChoiceEnum(["eos", "none"])


@dataclass
class PermutationLMConfig(FairseqDataclass):
    data: Optional[str] = option(None, "fairseq-preprocess --only-source output")
    sample_break_mode: BREAK_MODES = option(
        "eos", "eos: one line is one sequence; none: blocks of --tokens-per-sample"
    )
    tokens_per_sample: int = option(
        512, "the longest sequence, <s> and </s> included", range=Range(3)
    )
    seed: int = II("common.seed")


@register_task("permutation_lm", dataclass=PermutationLMConfig)
class PermutationLMTask(PluginTask, UniLMTask, FairseqTask):
    """Permutation (or causal) language modelling of ``<s> x </s>`` on one stack."""

    cfg: PermutationLMConfig
    # one dictionary reads the input and the target
    source_dictionary = target_dictionary = property(attrgetter("dictionary"))

    def __init__(self, cfg: PermutationLMConfig, dictionary: Dictionary):
        super().__init__(cfg)
        self.dictionary = dictionary
        self.attention_mask = None
        self.model_positions: Optional[int] = None  # the one positions table, once built

    def default_attention_mask(self) -> str:
        """XLNet's random factorisation order (``UniLMTask``)."""
        return "permutation"

    @classmethod
    def setup_task(cls, cfg: PermutationLMConfig, **kwargs):
        require(
            cfg.data is not None,
            "permutation_lm needs a data directory (fairseq-preprocess --only-source)",
        )
        check_config(cfg, PermutationLMConfig)
        path = os.path.join(utils.split_paths(cfg.data)[0], "dict.txt")
        require(
            os.path.isfile(path),
            f"{path} does not exist; binarize the text with "
            "fairseq-preprocess --only-source (without --source-lang)",
        )
        return cls(cfg, load_with_mask_symbol(path))

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        refuse_truncated_binaries(self.cfg.data, split)
        paths = utils.split_paths(self.cfg.data)
        split_path = os.path.join(paths[(epoch - 1) % len(paths)], split)
        lines = data_utils.load_indexed_dataset(split_path, self.dictionary, combine=combine)
        if lines is None:
            raise FairseqExtError(
                f"no {split} split at {split_path}.{{bin,idx}}; binarize it with "
                "fairseq-preprocess --only-source"
            )
        limit = self.cfg.tokens_per_sample - 1  # one position for <s>
        if self.cfg.sample_break_mode == "eos":
            refuse_empty_lines(
                lines.sizes,
                split=split,
                row_name="line",
                data=self.cfg.data,
                fix="remove empty lines before fairseq-preprocess, or use --sample-break-mode none",
            )
            refuse_long_lines(
                lines.sizes,
                split=split,
                row_name="line",
                limit=limit,
                markers=("</s>",),
                limit_name=f"--tokens-per-sample {self.cfg.tokens_per_sample} minus <s>",
                fix=(
                    "raise it, split long lines, or use --sample-break-mode none (fixed-size "
                    "blocks)"
                ),
            )
            blocks = lines
        else:
            blocks = TokenBlockDataset(
                lines,
                lines.sizes,
                limit,
                pad=self.dictionary.pad(),
                eos=self.dictionary.eos(),
                break_mode="none",
            )
        sequences = PrependTokenDataset(blocks, self.dictionary.bos())
        self.datasets[split] = language_model_batches(
            sequences, blocks, pad=self.dictionary.pad(), seed=self.cfg.seed + epoch, counted=blocks
        )
        logger.info("%s: %d sequences from %s", split, len(sequences), split_path)

    def max_positions(self):
        return self.cfg.tokens_per_sample

    def get_batch_iterator(self, dataset, max_positions=None, **options):
        """Every sequence fits the model's positions (``check_model_positions``, once the model
        is built), and every example is in a batch (``PluginTask``)."""
        if isinstance(max_positions, tuple):  # the model's (P, P) against our int
            max_positions = min(p for p in max_positions if p is not None)
        if self.model_positions is not None:
            self.check_model_positions(dataset, self.model_positions)
        return super().get_batch_iterator(dataset, max_positions=max_positions, **options)

    def check_model_positions(self, dataset, positions: int) -> None:
        """Every sequence, <s> and </s> included, must fit the model's positions table."""
        sizes = dataset.sizes[0] if isinstance(dataset.sizes, list) else dataset.sizes
        row = first_bad_row(sizes > positions)
        if row is not None:
            raise FairseqExtError(
                f"a sequence of {int(sizes[row])} tokens (with <s> and </s>) is longer than the "
                f"model's {positions} positions (--max-positions); lower --tokens-per-sample"
            )

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        prepare_unilm_model(
            model,
            cfg,
            task="permutation_lm",
            dictionary=self.dictionary,
            from_checkpoint=from_checkpoint,
        )
        self.attention_mask = model.attention_mask
        self.model_positions = model.encoder.max_positions()
        return model

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        """Each sequence in a fresh random order (fairseq seeds torch per update)."""
        if ATTENTION_VARIANTS[self.attention_mask].random_order:
            tokens = sample["net_input"]["src_tokens"]
            sample["net_input"]["order"] = random_order(
                tokens.eq(self.dictionary.pad()), keep_first=1
            )
        return super().train_step(sample, model, criterion, optimizer, update_num, ignore_grad)

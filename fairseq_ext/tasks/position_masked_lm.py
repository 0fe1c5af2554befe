# No "from __future__ import annotations" here: fairseq reads the dataclass field types at run time.
"""Task ``position_masked_lm``: fairseq's ``masked_lm`` plus position masking (Wagner et al. 2020,
section 2.1): per example and epoch, BERT's token masking and, independently of it by default,
``--position-mask-prob`` of the tokens get the mask-position embedding (90/5/5) and their
original position as a label; with ``--position-mask-prob 0`` it is fairseq's ``masked_lm``."""

import logging
import os
from dataclasses import dataclass

import numpy as np
from fairseq import utils
from fairseq.data import IdDataset, PrependTokenDataset, RightPadDataset, data_utils
from fairseq.data.shorten_dataset import maybe_shorten_dataset
from fairseq.dataclass import ChoiceEnum
from fairseq.tasks import register_task
from fairseq.tasks.masked_lm import MaskedLMConfig, MaskedLMTask

from fairseq_ext.common.config_fields import Range, check_config, flag, option
from fairseq_ext.common.errors import FairseqExtError, require
from fairseq_ext.common.interfaces import PositionMaskingTask
from fairseq_ext.data import NO_POSITION_LABEL, POSITION_MASK_SOURCES, PositionMaskingDataset
from fairseq_ext.data.language_model_batches import language_model_batches
from fairseq_ext.data.size_checks import (
    refuse_empty_lines,
    refuse_long_lines,
    refuse_missing_dictionary,
    refuse_truncated_binaries,
)
from fairseq_ext.tasks.base import PluginTask

logger = logging.getLogger(__name__)

POSITION_MASK_SOURCE_CHOICES = ChoiceEnum(list(POSITION_MASK_SOURCES))
UNIT = Range(0, 1)
# the options of the task that PositionMaskingDataset takes under the same names
MASKING_OPTIONS = (
    "mask_prob leave_unmasked_prob random_token_prob freq_weighted_replacement position_mask_prob "
    "position_keep_prob position_random_prob position_mask_source mask_special_tokens"
).split()


@dataclass
class PositionMaskedLMConfig(MaskedLMConfig):
    position_mask_prob: float = option(
        0.10,
        "fraction of the tokens whose position is masked (section 5.1: the paper's best 0.10); 0 "
        "gives fairseq's masked_lm",
        range=UNIT,
    )
    position_keep_prob: float = option(
        0.05,
        "of the position-masked tokens, the fraction that keeps its true position (section 2.1: "
        "0.05); with --position-random-prob at most 1",
        range=UNIT,
    )
    position_random_prob: float = option(
        0.05,
        "of the position-masked tokens, the fraction that gets a random position of its sequence "
        "(section 2.1: 0.05)",
        range=UNIT,
    )
    position_mask_source: POSITION_MASK_SOURCE_CHOICES = option(
        "independent",
        "independent: position-masked tokens are drawn from all tokens; token_masked: from the "
        "token-masked ones (--position-mask-prob is then a fraction of those)",
    )
    mask_special_tokens: bool = option(
        False, "let token masking choose <s> and </s> too, as fairseq's masked_lm does"
    )


def validate_config(cfg: PositionMaskedLMConfig) -> None:
    """One clear error per out-of-range option (``PositionMaskedLMConfig``, and fairseq's
    ``masked_lm`` options the task relies on), before any data is read."""
    check_config(cfg, PositionMaskedLMConfig)
    for name in ("mask_prob", "leave_unmasked_prob", "random_token_prob"):
        value = getattr(cfg, name)
        require(0.0 <= value <= 1.0, f"{flag(name)} must be in [0, 1], got {value}")
    require(
        cfg.mask_prob > 0.0,
        "--mask-prob must be > 0: the MLM loss needs token-masked tokens (BERT uses 0.15)",
    )
    for keep, random in (
        ("leave_unmasked_prob", "random_token_prob"),
        ("position_keep_prob", "position_random_prob"),
    ):
        shares = getattr(cfg, keep), getattr(cfg, random)
        require(
            sum(shares) <= 1.0,
            f"{flag(keep)} + {flag(random)} must be <= 1, got {shares[0]} + {shares[1]}",
        )
    require(
        cfg.tokens_per_sample >= 2, f"--tokens-per-sample must be >= 2, got {cfg.tokens_per_sample}"
    )
    for name, default in (
        ("mask_whole_words", False),
        ("mask_multiple_length", 1),
        ("mask_stdev", 0.0),
        ("skip_masking", False),
        ("d2v2_multi", False),
        ("include_target_tokens", False),
    ):
        require(
            getattr(cfg, name) == default,
            f"{flag(name)} is a masked_lm option that position_masked_lm does not "
            f"support; leave it at its default ({default}) or use --task masked_lm",
        )


@register_task("position_masked_lm", dataclass=PositionMaskedLMConfig)
class PositionMaskedLMTask(PluginTask, PositionMaskingTask, MaskedLMTask):
    """Masked LM whose examples also carry masked positions and their labels."""

    cfg: PositionMaskedLMConfig

    @classmethod
    def setup_task(cls, cfg: PositionMaskedLMConfig, **kwargs):
        validate_config(cfg)
        refuse_missing_dictionary(os.path.join(utils.split_paths(cfg.data)[0], "dict.txt"))
        return super().setup_task(cfg, **kwargs)

    def longest_example(self) -> int:
        """``--tokens-per-sample``: no example is longer (``_check_block_sizes``)."""
        return self.cfg.tokens_per_sample

    def _load_dataset_split(self, split, epoch, combine):
        """masked_lm's token blocks with ``<s>`` prepended. With ``--sample-break-mode eos``
        every block is one line of the data, so the lines are used directly: fairseq's
        ``TokenBlockDataset`` fails in that mode on numpy >= 2 (it calls the removed
        ``np.compat.long``)."""
        if self.cfg.sample_break_mode != "eos":
            return super()._load_dataset_split(split, epoch, combine)
        paths = utils.split_paths(self.cfg.data)
        split_path = os.path.join(paths[(epoch - 1) % len(paths)], split)
        lines = data_utils.load_indexed_dataset(split_path, self.source_dictionary, combine=combine)
        if lines is None:
            raise FileNotFoundError(f"Dataset not found: {split} ({split_path})")
        lines = maybe_shorten_dataset(
            lines,
            split,
            self.cfg.shorten_data_split_list,
            self.cfg.shorten_method,
            self.cfg.tokens_per_sample,
            self.cfg.seed,
        )
        logger.info("loaded %d lines (one block each) from: %s", len(lines), split_path)
        return PrependTokenDataset(lines, self.source_dictionary.bos())

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        refuse_truncated_binaries(self.cfg.data, split)
        try:
            blocks = self._load_dataset_split(split, epoch, combine)
        except FileNotFoundError as exc:
            raise FairseqExtError(
                f"{exc}: binarize the {split} split with fairseq-preprocess --only-source "
                f"(e.g. data_prep/wikitext2.sh) into {self.cfg.data}"
            ) from None
        self._check_block_sizes(split, blocks.sizes)
        cfg = self.cfg
        masked = PositionMaskingDataset(
            blocks,
            self.source_dictionary,
            self.mask_idx,
            split,
            seed=cfg.seed,
            **{name: getattr(cfg, name) for name in MASKING_OPTIONS},
        )
        source = masked.field("source")
        net_input = {"src_positions": RightPadDataset(masked.field("positions"), pad_idx=0)}
        if cfg.include_index:
            net_input["src_id"] = IdDataset()
        position_target = RightPadDataset(
            masked.field("position_target"), pad_idx=NO_POSITION_LABEL
        )
        # masked_lm's batches and shuffle, drawn from the same seed
        self.datasets[split] = language_model_batches(
            source,
            masked.field("target"),
            pad=self.source_dictionary.pad(),
            seed=cfg.seed,
            counted=source,
            net_input=net_input,
            fields={"position_target": position_target},
        )

    def _check_block_sizes(self, split: str, sizes: np.ndarray) -> None:
        if self.cfg.sample_break_mode == "eos":  # a line is an example: <s> and </s> alone is empty
            refuse_empty_lines(
                sizes,
                split=split,
                row_name="line",
                data=self.cfg.data,
                markers=("<s>", "</s>"),
                fix="with --sample-break-mode eos every line is an example: remove empty or "
                "whitespace-only lines before fairseq-preprocess (data_prep/wikitext2.sh "
                "drops them)",
            )
        limit = self.cfg.tokens_per_sample
        refuse_long_lines(
            sizes,
            split=split,
            row_name="example",
            limit=limit,
            markers=("<s>",),
            option="--tokens-per-sample",
            fix="the position classifier has one class per position. Use --sample-break-mode none "
            "(blocks of exactly that size), raise --tokens-per-sample, or split long lines "
            "before fairseq-preprocess",
        )

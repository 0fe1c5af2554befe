# No "from __future__ import annotations" here: fairseq reads the dataclass field types at run time.
"""Task ``prophetnet_denoising``: ProphetNet's pre-training on monolingual text (Qi et al. 2020,
sections 2.4 and 3.1): one MASS-style span of ``--mask-ratio`` of every ``--block-size`` block is
masked in the encoder input and predicted with the future n-gram loss."""

import glob
import logging
import os
from dataclasses import dataclass
from operator import attrgetter
from typing import Optional

from fairseq.data import Dictionary, data_utils
from fairseq.dataclass import FairseqDataclass
from fairseq.tasks import FairseqTask, register_task
from omegaconf import II, MISSING

from fairseq_ext.common.config_fields import Range, check_config, option
from fairseq_ext.common.errors import FairseqExtError, require
from fairseq_ext.data.mask_symbol import MASK_SYMBOL, load_with_mask_symbol
from fairseq_ext.data.mass_span_dataset import MassSpanDataset
from fairseq_ext.data.size_checks import (
    refuse_empty_lines,
    refuse_long_lines,
    refuse_missing_data_folder,
    refuse_truncated_binaries,
)
from fairseq_ext.tasks.base import PluginTask

logger = logging.getLogger(__name__)


@dataclass
class ProphetNetDenoisingConfig(FairseqDataclass):
    data: str = option(MISSING, "folder made by fairseq-preprocess --only-source")
    source_lang: Optional[str] = option(
        None,
        "language suffix of the files (e.g. 'article'); default: the one dict.*.txt of the folder",
    )
    mask_ratio: float = option(
        0.15,
        "share of each block that is masked (section 3.1: 0.15)",
        range=Range(0, 1, low_open=True),
    )
    block_size: int = option(
        64, "tokens per block; one span is masked in each (section 3.1: 64)", range=Range(1)
    )
    max_source_positions: int = option(
        1024,
        "longest line accepted, in tokens; a positions table of the model, so fine-tuning "
        "(translation_prophetnet, fairseq's 1024) must use the same",
        range=Range(2),
    )
    max_target_positions: int = option(
        1024,
        "decoder positions (>= the longest line); fine-tuning must use the same",
        range=Range(2),
    )
    seed: int = II("common.seed")
    dataset_impl: Optional[str] = II("dataset.dataset_impl")
    train_subset: str = II("dataset.train_subset")


def _infer_lang(folder: str) -> str:
    dicts = sorted(glob.glob(os.path.join(folder, "dict.*.txt")))
    require(
        len(dicts) == 1,
        f"{folder} has {len(dicts)} dict.*.txt files; name the side with --source-lang",
    )
    return os.path.basename(dicts[0])[len("dict.") : -len(".txt")]


def _language_model_data(folder: str) -> bool:
    """``fairseq-preprocess --only-source`` without ``-s``: ``dict.txt`` and no
    ``dict.LANG.txt``."""
    return os.path.exists(os.path.join(folder, "dict.txt")) and not glob.glob(
        os.path.join(glob.escape(folder), "dict.*.txt")
    )


@register_task("prophetnet_denoising", dataclass=ProphetNetDenoisingConfig)
class ProphetNetDenoisingTask(PluginTask, FairseqTask):
    """Span-masking pre-training of an encoder-decoder on monolingual text."""

    cfg: ProphetNetDenoisingConfig
    # one dictionary reads the input and the target
    source_dictionary = target_dictionary = property(attrgetter("dictionary"))

    def __init__(self, cfg: ProphetNetDenoisingConfig, dictionary: Dictionary):
        super().__init__(cfg)
        self.dictionary = dictionary
        self.mask_idx = dictionary.index(MASK_SYMBOL)

    @classmethod
    def setup_task(cls, cfg: ProphetNetDenoisingConfig, **kwargs):
        check_config(cfg, ProphetNetDenoisingConfig)
        refuse_missing_data_folder(cfg.data)
        folder = cfg.data.split(os.pathsep)[0]
        require(
            not _language_model_data(folder),
            f"{folder} was binarized for a language model (dict.txt, no language); "
            "prophetnet_denoising reads dict.LANG.txt and no --source-lang fits: binarize it "
            "again with fairseq-preprocess --only-source -s LANG (e.g. -s en) and give the same "
            "--source-lang",
        )
        if cfg.source_lang is None:
            cfg.source_lang = _infer_lang(folder)
        path = os.path.join(folder, f"dict.{cfg.source_lang}.txt")
        require(os.path.exists(path), f"{path} does not exist; check --source-lang")
        dictionary = load_with_mask_symbol(path)
        logger.info("dictionary: %d types (with %s)", len(dictionary), MASK_SYMBOL)
        return cls(cfg, dictionary)

    def _split_prefix(self, split: str) -> str:
        folder, lang = self.cfg.data.split(os.pathsep)[0], self.cfg.source_lang
        for name in (f"{split}.{lang}-None.{lang}", f"{split}.{lang}", split):
            prefix = os.path.join(folder, name)
            if os.path.exists(prefix + ".idx"):
                return prefix
        raise FairseqExtError(
            f"no binarized '{split}' split for '{lang}' in {folder} (looked for "
            f"{split}.{lang}-None.{lang}.idx); run fairseq-preprocess --only-source"
        )

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        prefix = self._split_prefix(split)
        refuse_truncated_binaries(self.cfg.data, split)
        tokens = data_utils.load_indexed_dataset(
            prefix, self.dictionary, self.cfg.dataset_impl, combine=combine
        )
        require(tokens is not None, f"cannot read {prefix}.bin/.idx")
        refuse_empty_lines(tokens.sizes, split=split, row_name="text line", data=self.cfg.data)
        limit = min(self.cfg.max_source_positions, self.cfg.max_target_positions)
        refuse_long_lines(
            tokens.sizes,
            split=split,
            row_name="text line",
            limit=limit,
            option="--max-source-positions/--max-target-positions",
        )
        self.datasets[split] = MassSpanDataset(
            tokens,
            tokens.sizes,
            self.dictionary,
            self.mask_idx,
            seed=self.cfg.seed,
            block_size=self.cfg.block_size,
            ratio=self.cfg.mask_ratio,
            shuffle=split == self.cfg.train_subset,
        )
        logger.info("%s: %d lines from %s", split, len(tokens), prefix)

    def max_positions(self):
        return self.cfg.max_source_positions, self.cfg.max_target_positions

# No "from __future__ import annotations" here: fairseq reads the dataclass field types at run time.
"""Task ``prophetnet_denoising``: ProphetNet's pre-training on raw monolingual text (Qi et al.
2020, section 2.4 and 3.1): MASS-style span masking (one contiguous span of ``--mask-ratio``
= 15% of every ``--block-size`` = 64 tokens, replaced 80/10/10 in the encoder input) and the
future n-gram loss on the span (``criterions.ngram_language_loss``).

Data: a folder binarized with ``fairseq-preprocess --only-source`` (``data_prep/gigaword.sh``
writes ``bin-article`` from the article side, with the fine-tuning dictionary). The task
adds ``<mask>`` to the dictionary, as ``translation_prophetnet`` does, so the checkpoint
loads into fine-tuning with ``--finetune-from-model``.
"""
import glob
import logging
import os
from dataclasses import dataclass, field
from typing import Optional

from fairseq.data import Dictionary, data_utils
from fairseq.dataclass import FairseqDataclass
from fairseq.tasks import FairseqTask, register_task
from omegaconf import II, MISSING

from fairseq_ext.data import CompleteBatchesTaskMixin
from fairseq_ext.data.mass_span_dataset import MassSpanDataset
from fairseq_ext.data.size_checks import refuse_empty_lines, refuse_long_lines, refuse_truncated_binaries
from fairseq_ext.errors import FairseqExtError, require
from fairseq_ext.tasks.one_dictionary import OneDictionaryTaskMixin
from fairseq_ext.tasks.translation_prophetnet import MASK_SYMBOL, with_mask_symbol

logger = logging.getLogger(__name__)


@dataclass
class ProphetNetDenoisingConfig(FairseqDataclass):
    data: str = field(default=MISSING, metadata={"help": "folder made by fairseq-preprocess --only-source"})
    source_lang: Optional[str] = field(
        default=None, metadata={"help": "language suffix of the files (e.g. 'article'); default: the one "
                                        "dict.*.txt of the folder"})
    mask_ratio: float = field(default=0.15, metadata={"help": "share of each block that is masked, in (0, 1]"})
    block_size: int = field(default=64, metadata={"help": "tokens per block; one span is masked in each"})
    # The positions tables are model weights: fine-tuning (translation_prophetnet, default 1024
    # like fairseq's translation) must use the same values to load the checkpoint.
    max_source_positions: int = field(default=1024, metadata={"help": "longest line accepted, in tokens"})
    max_target_positions: int = field(default=1024, metadata={"help": "decoder positions (>= the longest line)"})
    seed: int = II("common.seed")
    dataset_impl: Optional[str] = II("dataset.dataset_impl")
    train_subset: str = II("dataset.train_subset")


def _infer_lang(folder: str) -> str:
    dicts = sorted(glob.glob(os.path.join(folder, "dict.*.txt")))
    require(len(dicts) == 1, f"{folder} has {len(dicts)} dict.*.txt files; name the side with --source-lang")
    return os.path.basename(dicts[0])[len("dict."):-len(".txt")]


@register_task("prophetnet_denoising", dataclass=ProphetNetDenoisingConfig)
class ProphetNetDenoisingTask(CompleteBatchesTaskMixin, OneDictionaryTaskMixin, FairseqTask):
    """Span-masking pre-training of an encoder-decoder on monolingual text."""

    cfg: ProphetNetDenoisingConfig

    def __init__(self, cfg: ProphetNetDenoisingConfig, dictionary: Dictionary):
        super().__init__(cfg)
        self.dictionary = dictionary
        self.mask_idx = dictionary.index(MASK_SYMBOL)

    @classmethod
    def setup_task(cls, cfg: ProphetNetDenoisingConfig, **kwargs):
        require(0.0 < cfg.mask_ratio <= 1.0, f"--mask-ratio must be in (0, 1] (the paper uses 0.15), got {cfg.mask_ratio}")
        require(cfg.block_size >= 1, f"--block-size must be >= 1 (the paper uses 64), got {cfg.block_size}")
        for option, value in (("--max-source-positions", cfg.max_source_positions),
                              ("--max-target-positions", cfg.max_target_positions)):
            require(value >= 2, f"{option} must be >= 2 (a line has a token and </s>; the default is 1024), "
                                f"got {value}")
        folder = cfg.data.split(os.pathsep)[0]
        require(os.path.isdir(folder), f"data folder {folder} does not exist")
        if cfg.source_lang is None:
            cfg.source_lang = _infer_lang(folder)
        path = os.path.join(folder, f"dict.{cfg.source_lang}.txt")
        require(os.path.exists(path), f"{path} does not exist; check --source-lang")
        dictionary = with_mask_symbol(Dictionary.load(path))
        logger.info("dictionary: %d types (with %s)", len(dictionary), MASK_SYMBOL)
        return cls(cfg, dictionary)

    def _split_prefix(self, split: str) -> str:
        folder, lang = self.cfg.data.split(os.pathsep)[0], self.cfg.source_lang
        for name in (f"{split}.{lang}-None.{lang}", f"{split}.{lang}", split):
            prefix = os.path.join(folder, name)
            if os.path.exists(prefix + ".idx"):
                return prefix
        raise FairseqExtError(f"no binarized '{split}' split for '{lang}' in {folder} (looked for "
                              f"{split}.{lang}-None.{lang}.idx); run fairseq-preprocess --only-source")

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        prefix = self._split_prefix(split)
        refuse_truncated_binaries(self.cfg.data, split)
        tokens = data_utils.load_indexed_dataset(prefix, self.dictionary, self.cfg.dataset_impl, combine=combine)
        require(tokens is not None, f"cannot read {prefix}.bin/.idx")
        refuse_empty_lines(tokens.sizes, split=split, row_name="text line", data=self.cfg.data)
        limit = min(self.cfg.max_source_positions, self.cfg.max_target_positions)
        refuse_long_lines(tokens.sizes, split=split, row_name="text line", limit=limit,
                          option="--max-source-positions/--max-target-positions")
        self.datasets[split] = MassSpanDataset(
            tokens, tokens.sizes, self.dictionary, self.mask_idx, seed=self.cfg.seed,
            block_size=self.cfg.block_size, ratio=self.cfg.mask_ratio, shuffle=split == self.cfg.train_subset)
        logger.info("%s: %d lines from %s", split, len(tokens), prefix)

    def max_positions(self):
        return self.cfg.max_source_positions, self.cfg.max_target_positions

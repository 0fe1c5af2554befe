# No "from __future__ import annotations" here: fairseq reads the dataclass field types at run time.
"""``--unsorted-batches`` for the pair tasks (``translation_prophetnet``, ``unilm_seq2seq``).

fairseq orders the training pairs by source length (ties by target length) before cutting
them into batches of ``--max-tokens``, so every batch holds pairs of nearly one length. With
``--unsorted-batches`` the pairs are taken in a random order drawn from ``--seed`` (fairseq
draws ``ordered_indices`` under ``data_utils.numpy_seed``), so a batch mixes short and long
pairs, at the cost of more padding. On the CPU-scale Gigaword runs of table 2
(docs/results/prophetnet.md), ProphetNet n = 2 trained on length-sorted batches wrote one
headline for every article in most runs, and on unsorted batches it read its source in every run.
"""
from dataclasses import dataclass, field

import numpy as np
from fairseq.data import BaseWrapperDataset
from fairseq.tasks.translation import TranslationConfig


@dataclass
class UnsortedBatchesConfig(TranslationConfig):
    unsorted_batches: bool = field(
        default=False, metadata={"help": "cut batches from the pairs in a random order (drawn from --seed) "
                                         "instead of fairseq's order by source length, so that a batch "
                                         "mixes lengths"})


class UnsortedPairs(BaseWrapperDataset):
    """A ``LanguagePairDataset`` whose pairs come in a random order; sizes are the wrapped ones."""

    @property
    def src_sizes(self):
        return self.dataset.src_sizes

    @property
    def tgt_sizes(self):
        return self.dataset.tgt_sizes

    def ordered_indices(self):
        return np.random.permutation(len(self))


def in_batch_order(dataset, cfg: UnsortedBatchesConfig):
    """The dataset the task batches: ``dataset`` itself, or its pairs unsorted when asked."""
    return UnsortedPairs(dataset) if cfg.unsorted_batches else dataset

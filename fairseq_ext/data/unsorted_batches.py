# No "from __future__ import annotations" here: fairseq reads the dataclass field types at run time.
"""``--unsorted-batches`` for the pair tasks (``translation_prophetnet``, ``unilm_seq2seq``):
training pairs cut into batches in a random order drawn from ``--seed`` instead of fairseq's
order by length, so that a batch mixes short and long pairs (docs/prophetnet.md says why it
matters)."""
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

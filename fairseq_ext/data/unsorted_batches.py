# No "from __future__ import annotations" here: fairseq reads the dataclass field types at run time.
"""``--unsorted-batches`` for the pair tasks (``translation_prophetnet``, ``unilm_seq2seq``):
batches cut from the pairs in a random order drawn again at each epoch from ``--seed`` plus the
epoch, so that a batch mixes lengths (docs/prophetnet.md) and a resumed run trains on what an
uninterrupted one does."""

from dataclasses import dataclass

import numpy as np
from fairseq.data import BaseWrapperDataset
from fairseq.tasks.translation import TranslationConfig

from fairseq_ext.common.config_fields import option


@dataclass
class UnsortedBatchesConfig(TranslationConfig):
    unsorted_batches: bool = option(
        False,
        "cut batches from the pairs in a random order (drawn from --seed and the epoch, again at "
        "each epoch) instead of fairseq's order by source length, so that a batch mixes lengths",
    )


class UnsortedPairs(BaseWrapperDataset):
    """A ``LanguagePairDataset`` whose pairs come in a random order, drawn again at each epoch;
    sizes are the wrapped ones."""

    can_reuse_epoch_itr_across_epochs = (
        False  # fairseq batches each epoch under numpy_seed(seed + epoch)
    )

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

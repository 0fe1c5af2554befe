# No "from __future__ import annotations" here: fairseq reads the dataclass field types at run time.
"""``--unsorted-batches`` for the pair tasks (``translation_prophetnet``, ``unilm_seq2seq``):
training pairs cut into batches in a random order drawn from ``--seed`` instead of fairseq's
order by length, so that a batch mixes short and long pairs (docs/prophetnet.md says why it
matters).

The batches are cut again at every epoch, from the order fairseq draws with ``--seed`` plus the
epoch number: what a run trains on in epoch E depends on ``--seed`` and E only, so a run stopped
and resumed (in another process, at any update) trains on what one uninterrupted run does.
fairseq's iterator cache would otherwise keep the batches of the epoch its process started in:
a run resumed in a later epoch would cut other batches, see some pairs of that epoch twice and
others not at all."""

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

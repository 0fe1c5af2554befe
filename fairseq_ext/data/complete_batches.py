"""Batching that gives every example a batch: fairseq 0.12's ``batch_by_size`` drops a final
batch whose size is no multiple of ``--required-batch-size-multiple``; the plugin's tasks hand
fairseq a dataset whose ``batch_by_size`` appends that tail as one more batch."""
from __future__ import annotations

import numpy as np
from fairseq.data import BaseWrapperDataset, FairseqDataset

from fairseq_ext.errors import FairseqExtError


class CompleteBatchesDataset(BaseWrapperDataset):
    """Wraps a dataset so that ``batch_by_size`` covers every index it is given."""

    def batch_by_size(self, indices, max_tokens=None, max_sentences=None, required_batch_size_multiple=1):
        batches = list(
            self.dataset.batch_by_size(
                indices,
                max_tokens=max_tokens,
                max_sentences=max_sentences,
                required_batch_size_multiple=required_batch_size_multiple,
            )
        )
        covered = sum(len(b) for b in batches)
        # batch_by_size walks ``indices`` in order, so what it dropped is the tail.
        if covered < len(indices):
            batches.append(np.asarray(indices[covered:], dtype=np.int64))
        return batches


def _plain(size):
    """A size (a number, or a tuple of them for source and target) with Python ints, which print
    as ``(1102, 20)``, not ``(np.int32(1102), ...)``."""
    if isinstance(size, (tuple, list)):
        return tuple(_plain(s) for s in size)
    return int(size) if isinstance(size, (int, np.integer)) else size


class CompleteBatchesTaskMixin:
    """Mix into a ``FairseqTask`` (before it in the bases) so that no example is dropped: every
    example gets a batch, and an example longer than the model's positions is one clear
    error (fairseq raises a bare ``Exception`` with a traceback there) unless the user asked
    fairseq to skip such examples (``--skip-invalid-size-inputs-valid-test``)."""

    def filter_indices_by_size(self, indices, dataset, max_positions=None, ignore_invalid_inputs=False):
        if not ignore_invalid_inputs:
            kept, ignored = dataset.filter_indices_by_size(indices, max_positions)
            if len(ignored):
                raise FairseqExtError(
                    f"example #{int(ignored[0])} (fairseq's 0-based id) has size {_plain(dataset.size(ignored[0]))}, "
                    f"more than the model's positions {_plain(max_positions)} ({len(ignored)} such example(s)); "
                    "split or filter long lines before fairseq-preprocess, pass the position limits the model "
                    "was trained with, or skip them knowingly with --skip-invalid-size-inputs-valid-test"
                )
            return kept
        return super().filter_indices_by_size(indices, dataset, max_positions, ignore_invalid_inputs)

    def get_batch_iterator(self, dataset: FairseqDataset, *args, **kwargs):
        wrappers = self.__dict__.setdefault("_complete_batch_wrappers", {})
        wrapped = wrappers.get(id(dataset))
        if wrapped is None or wrapped.dataset is not dataset:
            wrapped = CompleteBatchesDataset(dataset)
            wrappers[id(dataset)] = wrapped
        return super().get_batch_iterator(wrapped, *args, **kwargs)

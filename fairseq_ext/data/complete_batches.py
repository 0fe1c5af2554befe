"""Batching that gives every example a batch: fairseq 0.12's ``batch_by_size`` drops a final batch
short of ``--required-batch-size-multiple``, and ``filter_indices_by_size`` stops on an oversized
example with a bare ``Exception``; here the tail is one more batch, and an example beyond the
model's positions or ``--max-tokens`` is one clear error (unless fairseq is told to skip it)."""

from __future__ import annotations

import os
from typing import Optional

import numpy as np
from fairseq.data import BaseWrapperDataset, FairseqDataset

from fairseq_ext.common.errors import FairseqExtError


def _plain(size):
    """A size (a number, or a tuple of them for source and target) with Python ints, which print
    as ``(1102, 20)``, not ``(np.int32(1102), ...)``."""
    if isinstance(size, (tuple, list)):
        return tuple(_plain(s) for s in size)
    return int(size) if isinstance(size, (int, np.integer)) else size


class CompleteBatchesDataset(BaseWrapperDataset):
    """Wraps a dataset so that ``batch_by_size`` covers every index it is given, and
    ``filter_indices_by_size`` refuses an oversized example unless ``skip_oversized``. Wrappers
    of one dataset are equal, so fairseq's iterator cache (keyed by the dataset) serves them."""

    def __init__(self, dataset: FairseqDataset, skip_oversized: bool = False):
        super().__init__(dataset)
        self.skip_oversized = skip_oversized

    def __eq__(self, other):
        return (
            isinstance(other, CompleteBatchesDataset)
            and other.dataset is self.dataset
            and other.skip_oversized == self.skip_oversized
        )

    def __hash__(self):
        return hash((self.dataset, self.skip_oversized))

    def filter_indices_by_size(self, indices, max_sizes):
        kept, ignored = self.dataset.filter_indices_by_size(indices, max_sizes)
        if len(ignored) and not self.skip_oversized:
            size = _plain(self.dataset.size(ignored[0]))
            raise FairseqExtError(
                f"example #{int(ignored[0])} (fairseq's 0-based id) has size {size}, more than "
                f"the model's positions {_plain(max_sizes)} ({len(ignored)} such example(s)); "
                "split or filter long lines before fairseq-preprocess, pass the position limits "
                "the model was trained with, or skip them knowingly with "
                "--skip-invalid-size-inputs-valid-test"
            )
        return kept, ignored

    def batch_by_size(
        self, indices, max_tokens=None, max_sentences=None, required_batch_size_multiple=1
    ):
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


def _indexed_file(dataset) -> Optional[tuple[str, int]]:
    """``(prefix, lines)`` of the binarized file under ``dataset`` (its source side for a pair):
    the first ``_path`` found through the wrappers' ``dataset`` and ``src``."""
    todo, seen = [dataset], set()
    while todo:
        d = todo.pop(0)
        if d is None or id(d) in seen:
            continue
        seen.add(id(d))
        path = getattr(d, "_path", None)
        if isinstance(path, str):
            return path, len(d)
        todo += [getattr(d, name, None) for name in ("dataset", "src")]
    return None


def refuse_beyond_max_tokens(dataset: FairseqDataset, max_tokens: Optional[int]) -> None:
    """No example of ``dataset`` longer than ``max_tokens`` (``--max-tokens``): fairseq-generate
    and validation would stop with an ``AssertionError`` while batching, training would skip
    those examples with a warning. The message names the split, the line and its length."""
    if not max_tokens or len(dataset) == 0:
        return
    indices = np.arange(len(dataset))
    try:
        sizes = np.asarray(dataset.num_tokens_vec(indices))
    except NotImplementedError:
        sizes = np.fromiter((dataset.num_tokens(i) for i in indices), dtype=np.int64)
    longer = sizes > max_tokens
    if not longer.any():
        return
    row = int(np.argmax(longer))
    found = _indexed_file(dataset)
    where = f"example #{row} (fairseq's 0-based id)"
    if found is not None:
        prefix, lines = found
        split = os.path.basename(prefix).split(".")[0]
        place = f"{split} line {row + 1}" if lines == len(dataset) else f"{split} {where}"
        where = f"{place} of {os.path.dirname(prefix) or '.'}"
    raise FairseqExtError(
        f"{where} has {int(sizes[row])} tokens, more than --max-tokens {max_tokens} "
        f"({int(longer.sum())} of the {len(dataset)} are; the longest has {int(sizes.max())}): "
        f"give a --max-tokens (for validation: --max-tokens-valid) of {int(sizes.max())} or "
        "more, or split or filter long lines before fairseq-preprocess"
    )


def complete_batches(dataset: FairseqDataset, options: dict) -> CompleteBatchesDataset:
    """The dataset a task's ``get_batch_iterator`` hands fairseq for ``dataset``, given the
    keyword ``options`` it was called with (their ``ignore_invalid_inputs`` skips oversized
    examples, as fairseq does), once every example fits their ``max_tokens``
    (``refuse_beyond_max_tokens``)."""
    refuse_beyond_max_tokens(dataset, options.get("max_tokens"))
    return CompleteBatchesDataset(
        dataset, skip_oversized=options.get("ignore_invalid_inputs", False)
    )

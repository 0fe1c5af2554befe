"""``fairseq-interactive`` input, checked line by line, for the plugin's sequence-to-sequence
tasks.

fairseq-interactive reads its input in buffers of ``--buffer-size`` lines and hands each
buffer to the task's ``build_dataset_for_inference``, in input order; a line's id in the
output (``S-``/``H-`` lines) is its 0-based number in the input. An empty line is answered
with one line on stderr and skipped (no output under its id) and the session goes on with the
next line; a line the model cannot take (too long) ends the session with one clear error, as
fairseq-generate does for the same line in a binarized split.
"""
from __future__ import annotations

import numpy as np
from fairseq.data import BaseWrapperDataset

from fairseq_ext.errors import note, require


class SkippedRows(BaseWrapperDataset):
    """``dataset`` without the rows ``skipped``: no batch holds them, the others keep their ids."""

    def __init__(self, dataset, skipped: list[int]):
        super().__init__(dataset)
        self.skipped = np.asarray(skipped, dtype=np.int64)

    def ordered_indices(self):
        indices = self.dataset.ordered_indices()
        return indices[~np.isin(indices, self.skipped)]


class InteractiveInputTaskMixin:
    """Mix into a ``FairseqTask`` (before it in the bases): ``build_dataset_for_inference``
    numbers the input lines across buffers, answers and skips empty ones, and refuses the lines
    that ``check_input_length`` refuses."""

    def check_input_length(self, line: int, length: int) -> None:
        """Refuse input line ``line`` (1-based) of ``length`` tokens (with ``</s>``) when the
        model cannot take it; by default, longer than ``--max-source-positions``."""
        limit = self.cfg.max_source_positions
        require(length <= limit, f"input line {line} has {length} tokens, more than --max-source-positions "
                                 f"{limit}; split it or raise the limit")

    def build_dataset_for_inference(self, src_tokens, src_lengths, constraints=None):
        first = self.__dict__.get("_inference_lines_seen", 0) + 1
        empty = []
        for i, length in enumerate(int(n) for n in src_lengths):
            if length <= 1:  # only </s>
                note(f"input line {first + i} is empty: skipped, nothing is printed for id {first + i - 1} "
                     "(give one source sentence per line)")
                empty.append(i)
            else:
                self.check_input_length(first + i, length)
        self._inference_lines_seen = first - 1 + len(src_lengths)
        dataset = super().build_dataset_for_inference(src_tokens, src_lengths, constraints=constraints)
        return SkippedRows(dataset, empty) if empty else dataset

"""``fairseq-interactive`` input checked line by line for the plugin's sequence-to-sequence
tasks: an empty line is answered with one line on stderr and skipped, a line the model cannot
take ends the session with one clear error, as fairseq-generate does for a binarized split.
``fairseq_changes`` makes fairseq-interactive (the plugin's tasks) name a line that is not UTF-8
(file and line number) instead of stopping with Python's ``UnicodeDecodeError``."""

from __future__ import annotations

import functools
import sys
from typing import Callable, Iterator

import numpy as np
from fairseq.data import BaseWrapperDataset

from fairseq_ext.common.errors import FairseqExtError, note, require


def utf8_lines(stream, name: str) -> Iterator[str]:
    """The lines of the binary ``stream``, decoded; the first line that is not UTF-8 is named
    (``name`` line N, the byte and its column)."""
    for number, raw in enumerate(stream, 1):
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FairseqExtError(
                f"{name} line {number} is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column "
                f"{exc.start + 1}); convert the text to UTF-8 first, e.g. iconv -f latin1 -t utf-8"
            ) from None


def buffered_read(input: str, buffer_size: int) -> Iterator[list[str]]:
    """fairseq-interactive's ``buffered_read``: buffers of ``buffer_size`` stripped lines of
    ``input`` (a file, or ``-`` for standard input), read through ``utf8_lines``."""
    stream = sys.stdin.buffer if input == "-" else open(input, "rb")
    buffer = []
    try:
        for line in utf8_lines(stream, "standard input" if input == "-" else input):
            buffer.append(line.strip())
            if len(buffer) >= buffer_size:
                yield buffer
                buffer = []
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    if buffer:
        yield buffer


class SkippedRows(BaseWrapperDataset):
    """``dataset`` without the rows ``skipped``: no batch holds them, the others keep their ids."""

    def __init__(self, dataset, skipped: list[int]):
        super().__init__(dataset)
        self.skipped = np.asarray(skipped, dtype=np.int64)

    def ordered_indices(self):
        indices = self.dataset.ordered_indices()
        return indices[~np.isin(indices, self.skipped)]


def refuse_beyond_source_positions(limit: int) -> Callable[[int, int], None]:
    """The default rule for an input line: no more tokens than ``--max-source-positions``."""

    def check(line: int, length: int) -> None:
        require(
            length <= limit,
            f"input line {line} has {length} tokens, more than --max-source-positions {limit}, the "
            "model's positions (fixed when it was trained); split or shorten the line",
        )

    return check


class InteractiveInputLines:
    """The input lines of one task's session (fairseq-interactive, or the Python API), numbered
    across fairseq's buffers: empty lines are answered and skipped, the others must pass the
    task's ``check_line(line, length)`` (1-based line number, tokens with ``</s>``)."""

    def __init__(self, check_line: Callable[[int, int], None]):
        self.check_line, self.lines_seen = check_line, 0

    def dataset(self, build, src_tokens, src_lengths, constraints):
        """``build(src_tokens, src_lengths, constraints=constraints)`` (fairseq's
        ``build_dataset_for_inference``) without the empty lines, once every other line passed
        ``check_line``."""
        first = self.lines_seen + 1
        empty = []
        for i, length in enumerate(int(n) for n in src_lengths):
            if length <= 1:  # only </s>
                note(
                    f"input line {first + i} is empty: skipped, nothing is printed for id "
                    f"{first + i - 1} (give one source sentence per line)"
                )
                empty.append(i)
            else:
                self.check_line(first + i, length)
        self.lines_seen = first - 1 + len(src_lengths)
        dataset = build(src_tokens, src_lengths, constraints=constraints)
        return SkippedRows(dataset, empty) if empty else dataset


def inference_dataset_hook(parent: type) -> Callable:
    """The ``build_dataset_for_inference`` of a task on fairseq's task ``parent`` that holds an
    ``InteractiveInputLines`` as ``input_lines``: ``parent``'s dataset of the lines it passes."""

    def build_dataset_for_inference(task, src_tokens, src_lengths, constraints=None):
        build = functools.partial(parent.build_dataset_for_inference, task)
        return task.input_lines.dataset(build, src_tokens, src_lengths, constraints)

    return build_dataset_for_inference

"""The dictionaries a checkpoint records (the symbols of its task's source and target
dictionaries, in order, in its ``task_state``; older checkpoints at the top level), which every
load for a task compares with the task's: fairseq compares only the embedding shapes
(docs/fairseq-patches.md). And the check of a ``dict.*.txt`` file."""

from __future__ import annotations

import sys
from typing import Any, Iterable, Optional

from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.common.paths import refuse_cut_dictionary

RECORD_KEY = "dictionaries"


def task_dictionaries(task) -> Iterable[tuple[str, Any]]:
    """``(side, dictionary)`` of the source and target dictionaries the task has."""
    for side, attribute in (("source", "source_dictionary"), ("target", "target_dictionary")):
        try:
            dictionary = getattr(task, attribute)
        except (NotImplementedError, AttributeError):
            continue
        if dictionary is not None:
            yield side, dictionary


def with_dictionaries(task_state: dict, task) -> dict:
    """``task_state`` (``FairseqTask.state_dict()``) with ``{side: symbols}`` of the task's
    dictionaries: what a task of the plugin returns from ``state_dict()``."""
    symbols = {side: list(d.symbols) for side, d in task_dictionaries(task)}
    return {**task_state, RECORD_KEY: symbols}


def recorded_dictionaries(state: dict) -> Optional[dict[str, list[str]]]:
    """The dictionaries a loaded checkpoint records (``task_state``, or the top level), or None."""
    task_state = state.get("task_state")
    recorded = task_state.get(RECORD_KEY) if hasattr(task_state, "get") else None
    return recorded or state.get(RECORD_KEY) or None


# the symbols every fairseq dictionary starts with, before the lines of its file
FAIRSEQ_SYMBOLS = ("<s>", "<pad>", "</s>", "<unk>")
OVERWRITE = "#fairseq:overwrite"


def refuse_malformed_dictionary(path: str) -> None:
    """A dictionary file as fairseq's ``Dictionary.add_from_file`` reads it: UTF-8 lines
    ``<token> <count> [#fairseq:overwrite]``, no token twice (nor one of ``FAIRSEQ_SYMBOLS``)
    unless marked ``#fairseq:overwrite``; the first bad line is one line, not a traceback."""
    fix = (
        "use the dict.*.txt fairseq-preprocess wrote, or rebuild it with fairseq-preprocess "
        "(without --srcdict)"
    )
    seen = dict.fromkeys(FAIRSEQ_SYMBOLS, 0)
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8").rstrip()
            except UnicodeDecodeError as exc:
                raise FairseqExtError(
                    f"dictionary {path} line {number} is not UTF-8 (byte 0x{raw[exc.start]:02x}); "
                    f"{fix}"
                ) from None
            token, _, count = line.rpartition(" ")
            overwrite = count == OVERWRITE
            if overwrite:
                token, _, count = token.rpartition(" ")
            try:
                int(count)
            except ValueError:
                raise FairseqExtError(
                    f"dictionary {path} line {number} {line[:40]!r} has no count: fairseq reads "
                    f"every line as '<token> <count>'; give it its count back (any whole number) "
                    f"or {fix}"
                ) from None
            if token in seen and not overwrite:
                first = (
                    f"line {seen[token]}"
                    if seen[token]
                    else f"one of fairseq's own symbols ({' '.join(FAIRSEQ_SYMBOLS)})"
                )
                raise FairseqExtError(
                    f"dictionary {path} line {number} repeats the token {token!r} of {first}: "
                    f"a dictionary lists each token once (an edited or concatenated file?); "
                    f"remove the repeated line, mark it {OVERWRITE} to replace the earlier one, "
                    f"or {fix}"
                )
            seen.setdefault(token, number)


def main(paths: list[str]) -> int:
    """Each dictionary file of ``paths`` checked before a data script hands it to
    ``fairseq-preprocess --srcdict``: one line on stderr and 1 for the first bad one, else 0."""
    for path in paths:
        try:
            refuse_cut_dictionary(path)
            refuse_malformed_dictionary(path)
        except FairseqExtError as exc:
            sys.stderr.write(f"error: {exc}\n")
            return 1
    return 0

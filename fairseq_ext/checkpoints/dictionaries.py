"""The dictionaries a checkpoint records: the symbols of its task's source and target
dictionaries, in order.

fairseq compares a checkpoint with the data only through the embedding shapes: data binarized
with a dictionary of the same size but another order (``fairseq-preprocess`` without
``--srcdict`` on a corpus that covers every piece) loads without a word and decodes garbage.
So the plugin's tasks add the symbols to their ``state_dict()``, which fairseq's trainer saves
as the checkpoint's ``task_state`` (``with_dictionaries``), and every load for a task compares
them with the task's (``checks.check_dictionaries``). Checkpoints saved before the record moved
into ``task_state`` hold it at the top level (``RECORD_KEY``); ``recorded_dictionaries`` reads
both. Checkpoints without any record keep the size check of ``shapes``.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

RECORD_KEY = "dictionaries"


def task_dictionaries(task) -> Iterable[tuple[str, Any]]:
    """``(side, dictionary)`` of the task's source and target dictionaries that it has."""
    for side, attribute in (("source", "source_dictionary"), ("target", "target_dictionary")):
        try:
            dictionary = getattr(task, attribute)
        except (NotImplementedError, AttributeError):
            continue
        if dictionary is not None:
            yield side, dictionary


def record_dictionaries(task) -> dict[str, list[str]]:
    """``{side: symbols}`` of the task's source and target dictionaries, for the checkpoint."""
    return {side: list(dictionary.symbols) for side, dictionary in task_dictionaries(task)}


def with_dictionaries(task_state: dict, task) -> dict:
    """``task_state`` (what ``FairseqTask.state_dict`` returns) plus the task's dictionaries: what
    a task of the plugin returns from ``state_dict()``."""
    return {**task_state, RECORD_KEY: record_dictionaries(task)}


def recorded_dictionaries(state: dict) -> Optional[dict[str, list[str]]]:
    """The dictionaries a loaded checkpoint records: in its ``task_state``, or (checkpoints saved
    before the record moved there) at its top level; None without a record."""
    task_state = state.get("task_state")
    recorded = task_state.get(RECORD_KEY) if hasattr(task_state, "get") else None
    return recorded or state.get(RECORD_KEY) or None

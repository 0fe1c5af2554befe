"""The ``allow-list``, ``checked-loading`` and ``ensemble-task`` rows: fairseq's checkpoint
loaders with the checks of ``checkpoints.checks`` (docs/fairseq-patches.md)."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
from typing import Iterator, Optional

from fairseq_ext.checkpoints import checks
from fairseq_ext.checkpoints.loading import SAFE_CHECKPOINT_GLOBALS, safe_load
from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.fairseq_changes.patch_scope import is_plugin_task, serves

# (task, paths) of the load under way for a task (``loading_for``), read by ``guarded_loader``
_LOADING_FOR: contextvars.ContextVar[Optional[tuple]] = contextvars.ContextVar(
    "fairseq_ext_loading_for", default=None
)


def allowing_fairseq_globals(add_safe_globals):
    """torch's allow-list gains what fairseq's checkpoints pickle; nothing is replaced."""
    add_safe_globals(list(SAFE_CHECKPOINT_GLOBALS))
    return add_safe_globals


def _task_of_load(path: str):
    task, paths = _LOADING_FOR.get() or (None, None)
    return task if paths is None or os.path.abspath(path) in paths else None


def _apply_overrides(state: dict, overrides: dict) -> None:
    """What fairseq's ``load_checkpoint_to_cpu`` does with ``arg_overrides``."""
    from fairseq.dataclass.utils import overwrite_args_by_name

    if state.get("args") is not None:
        for key, value in overrides.items():
            setattr(state["args"], key, value)
    if state.get("cfg") is not None:
        overwrite_args_by_name(state["cfg"], overrides)


def _check_for_task(path: str, state: dict, task) -> None:
    if task is not None:
        task_name = getattr(getattr(task, "cfg", None), "_name", None)
        checks.check_task_family(path, state, task_name)
        checks.check_dictionaries(path, state, task, task_name)


def guarded_loader(load_fn):
    """``checkpoint_utils.load_checkpoint_to_cpu``: for a load the change serves, a file that is
    no finite fairseq checkpoint is one line and a load for a task checks ``--model-overrides``,
    the family and the dictionaries; elsewhere fairseq's load, and a checkpoint that a plugin task
    trained is still checked."""

    @functools.wraps(load_fn)
    def load_checkpoint_to_cpu(path, arg_overrides=None, load_on_all_ranks=False):
        task = _task_of_load(path)
        if not serves(task):
            state = load_fn(path, arg_overrides, load_on_all_ranks)
            if (
                isinstance(state, dict)
                and "model" in state
                and is_plugin_task(checks.trained_task(state))
            ):
                checks.refuse_non_finite(path, state)
                _check_for_task(path, state, task)
            return state
        try:
            state = load_fn(path, None, load_on_all_ranks)
        except Exception as exc:
            if isinstance(exc, FairseqExtError) or "://" in str(path):
                raise
            # an unreadable file, or fairseq's upgrade of something that is no checkpoint
            checks.refuse_non_checkpoint(path, safe_load(path))
            raise
        checks.refuse_non_checkpoint(path, state)
        checks.refuse_non_finite(path, state)
        if task is not None:
            checks.check_model_overrides(path, state, arg_overrides)
        _check_for_task(path, state, task)
        if arg_overrides:
            _apply_overrides(state, arg_overrides)
        return state

    return load_checkpoint_to_cpu


@contextlib.contextmanager
def loading_for(task, paths: Optional[list[str]] = None) -> Iterator[None]:
    """While the block runs, loads of ``paths`` (None: every load) are checked against ``task``."""
    token = _LOADING_FOR.set((task, None if paths is None else {os.path.abspath(p) for p in paths}))
    try:
        yield
    finally:
        _LOADING_FOR.reset(token)


def ensemble_loading(load_model_ensemble_and_task):
    """fairseq's ``load_model_ensemble_and_task`` saying which task its loads are for."""

    @functools.wraps(load_model_ensemble_and_task)
    def loader(filenames, arg_overrides=None, task=None, *args, **kwargs):
        with loading_for(task, list(filenames)):
            return load_model_ensemble_and_task(filenames, arg_overrides, task, *args, **kwargs)

    return loader

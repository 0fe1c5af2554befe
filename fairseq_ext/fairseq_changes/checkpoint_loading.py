"""The ``checked-loading`` and ``ensemble-task`` rows: fairseq's checkpoint loaders with the
checks of ``checkpoints.checks`` and ``checkpoints.overrides`` (docs/fairseq-patches.md)."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
from typing import Iterator, Optional

from fairseq_ext.checkpoints import checks
from fairseq_ext.checkpoints.loading import safe_load
from fairseq_ext.checkpoints.overrides import check_model_overrides
from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.fairseq_changes.patch_scope import is_plugin_task, serves

# (task, paths) of the load under way for a task: set by ``loading_for_task`` around fairseq's
# two loaders that know the task, read by ``guarded_loader``'s ``load_checkpoint_to_cpu``
_LOADING_FOR: contextvars.ContextVar[Optional[tuple]] = contextvars.ContextVar(
    "fairseq_ext_loading_for", default=None
)


def _task_of_load(path: str):
    loading = _LOADING_FOR.get()
    if loading is None:
        return None
    task, paths = loading
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
    if task is None:
        return
    task_name = getattr(getattr(task, "cfg", None), "_name", None)
    checks.check_task_family(path, state, task_name)
    checks.check_dictionaries(path, state, task, task_name)


def _load_for_plugin(load_fn, path, arg_overrides, load_on_all_ranks, task) -> dict:
    try:
        state = load_fn(path, None, load_on_all_ranks)
    except Exception as exc:
        if isinstance(exc, FairseqExtError) or "://" in str(path):
            raise
        # an unreadable file, or fairseq's upgrade of something that is no checkpoint: say which
        checks.refuse_non_checkpoint(path, safe_load(path))
        raise
    checks.refuse_non_checkpoint(path, state)
    checks.refuse_non_finite(path, state)
    if task is not None:
        check_model_overrides(path, state, arg_overrides)
    _check_for_task(path, state, task)
    if arg_overrides:
        _apply_overrides(state, arg_overrides)
    return state


def _load_for_fairseq(load_fn, path, arg_overrides, load_on_all_ranks, task) -> dict:
    """fairseq's own load; a checkpoint that a task of the plugin trained is still checked."""
    state = load_fn(path, arg_overrides, load_on_all_ranks)
    if isinstance(state, dict) and "model" in state and is_plugin_task(checks.trained_task(state)):
        checks.refuse_non_finite(path, state)
        _check_for_task(path, state, task)
    return state


def guarded_loader(load_fn):
    """``checkpoint_utils.load_checkpoint_to_cpu`` with the plugin's answers and checks."""

    @functools.wraps(load_fn)
    def load_checkpoint_to_cpu(path, arg_overrides=None, load_on_all_ranks=False):
        task = _task_of_load(path)
        load = _load_for_plugin if serves(task) else _load_for_fairseq
        return load(load_fn, path, arg_overrides, load_on_all_ranks, task)

    return load_checkpoint_to_cpu


@contextlib.contextmanager
def loading_for(task, paths: Optional[list[str]] = None) -> Iterator[None]:
    """While the block runs, loads of ``paths`` (None: every load) are checked against ``task``."""
    token = _LOADING_FOR.set((task, None if paths is None else {os.path.abspath(p) for p in paths}))
    try:
        yield
    finally:
        _LOADING_FOR.reset(token)


def loading_for_task(fn, task_of, paths_of):
    """Wrap a fairseq loader so that it checks ``paths_of(...)`` against ``task_of(...)``."""

    @functools.wraps(fn)
    def loader(*args, **kwargs):
        with loading_for(task_of(*args, **kwargs), paths_of(*args, **kwargs)):
            return fn(*args, **kwargs)

    return loader


def ensemble_task(filenames, arg_overrides=None, task=None, *args, **kwargs):
    return task


def ensemble_paths(filenames, *args, **kwargs):
    return list(filenames)


def ensemble_loading(load_model_ensemble_and_task):
    """fairseq's ``load_model_ensemble_and_task`` saying which task its loads are for."""
    return loading_for_task(load_model_ensemble_and_task, ensemble_task, ensemble_paths)

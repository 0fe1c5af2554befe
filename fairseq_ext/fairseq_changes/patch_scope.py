"""Whom a row of ``fairseq_changes`` serves: the plugin's own tasks, decided from the task at hand
(the call's, the command's ``cfg.task``, the task this process trains), never from the command
line; every task with ``FAIRSEQ_EXT_PATCH_ALL=1``; the call itself where no task is known.
``FAIRSEQ_EXT_PATCHES=off[:NAME,...]`` turns rows off (docs/fairseq-patches.md)."""

from __future__ import annotations

import contextlib
import contextvars
import os
from typing import Any, Iterator, Optional

ALL_TASKS = "FAIRSEQ_EXT_PATCH_ALL"  # "1": the changes serve fairseq's own tasks too
SWITCH = "FAIRSEQ_EXT_PATCHES"  # "off": install() changes nothing; "off:NAME,NAME": not those
TASK_MARK = "fairseq_ext_task"  # the attribute an exception leaving a command gets: its task
YES = ("1", "on", "true", "yes")

_COMMAND_TASK: contextvars.ContextVar[Optional[Any]] = contextvars.ContextVar(
    "fairseq_ext_command_task", default=None
)
_TRAINED: list[Any] = []  # the task this process trains (one entry), from the start of training


def all_tasks() -> bool:
    return os.environ.get(ALL_TASKS, "").strip().lower() in YES


def patch_off(name: str) -> bool:
    """Whether ``FAIRSEQ_EXT_PATCHES`` turns the change ``name`` off: ``off`` (every change) or
    ``off:NAME,NAME`` (those)."""
    value = os.environ.get(SWITCH, "").strip().lower()
    if value in ("off", "0", "false", "no"):
        return True
    return value.startswith("off:") and name in {n.strip() for n in value[4:].split(",")}


def defined_by_plugin(registered: Any) -> bool:
    """Whether a registered class (or an instance of it) is defined under ``fairseq_ext.``."""
    cls = registered if isinstance(registered, type) else type(registered)
    return registered is not None and cls.__module__.startswith("fairseq_ext.")


def is_plugin_task(task: Any) -> bool:
    """Whether ``task`` (a task instance, or a task's registered name) is one of the plugin's."""
    if isinstance(task, str):
        from fairseq.tasks import TASK_REGISTRY

        task = TASK_REGISTRY.get(task)
    return defined_by_plugin(task)


def task_of_cfg(cfg: Any) -> Optional[str]:
    """The task name of a command's configuration: ``cfg.task`` of an ``argparse.Namespace``,
    ``cfg.task._name`` of fairseq's ``DictConfig``."""
    task = getattr(cfg, "task", None)
    return task if isinstance(task, str) or task is None else getattr(task, "_name", None)


def serves(task: Any = None) -> bool:
    """Whether a change serves a call for ``task`` (None: the command's task, else the trained
    one, else the call itself; module docstring)."""
    if all_tasks():
        return True
    task = task if task is not None else _COMMAND_TASK.get()
    task = task if task is not None else (_TRAINED or [None])[0]
    return True if task is None else is_plugin_task(task)


@contextlib.contextmanager
def serving(task: Any) -> Iterator[None]:
    """The task of the fairseq command under way while the block runs; an exception that leaves it
    carries the task (``task_of``)."""
    token = _COMMAND_TASK.set(task)
    try:
        yield
    except BaseException as exc:
        if getattr(exc, TASK_MARK, None) is None:
            setattr(exc, TASK_MARK, task)
        raise
    finally:
        _COMMAND_TASK.reset(token)


def task_of(exc: BaseException) -> Optional[Any]:
    """The task of the command that ``exc`` ended (None: it ended none)."""
    return getattr(exc, TASK_MARK, None)


def training(task: Any) -> None:
    """Record ``task`` as the task this process trains (a later training replaces it)."""
    _TRAINED[:] = [task]


class ForTask:
    """A command's ``main`` run under ``serving(task)``: what ``call_main`` hands fairseq, so that
    a rank fairseq spawns (``torch.multiprocessing.spawn`` pickles ``main``) knows its task."""

    def __init__(self, main, task: Optional[str]):
        self.main, self.task = main, task

    def __call__(self, *args, **kwargs):
        with serving(self.task):
            return self.main(*args, **kwargs)

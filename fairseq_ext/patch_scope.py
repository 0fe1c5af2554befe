"""Whom a change of ``fairseq_ext.fairseq_patches`` serves: the plugin's own tasks, unless the user
opts in for every task or turns changes off.

A change serves a call when:

* ``FAIRSEQ_EXT_PATCH_ALL=1``: always, for fairseq's own tasks too;
* the task at hand (the trainer's, the one a checkpoint is loaded for) is a task of the
  plugin: its class is defined under ``fairseq_ext.``;
* with no task at hand, in a fairseq command (``fairseq-train``, ``python -m fairseq_cli.generate``,
  ...), its ``--task`` is a task of the plugin (without ``--task``: fairseq's default,
  ``translation``, is not); outside a fairseq command (Python code that loaded the plugin and
  calls fairseq itself, e.g. the hub), always.

``FAIRSEQ_EXT_PATCHES=off`` (every change) or ``off:NAME,NAME`` (the changes named) is read by
``fairseq_patches.install``: those are not made at all.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Optional

ALL_TASKS = "FAIRSEQ_EXT_PATCH_ALL"  # "1": the changes serve fairseq's own tasks too
SWITCH = "FAIRSEQ_EXT_PATCHES"  # "off": install() changes nothing; "off:NAME,NAME": not those
PLUGIN_PACKAGE = "fairseq_ext."
FAIRSEQ_DEFAULT_TASK = "translation"


def all_tasks() -> bool:
    return os.environ.get(ALL_TASKS, "").strip().lower() in ("1", "on", "true", "yes")


def patch_off(name: str) -> bool:
    """Whether ``FAIRSEQ_EXT_PATCHES`` turns the change ``name`` off: ``off`` (every change) or
    ``off:NAME,NAME`` (those)."""
    value = os.environ.get(SWITCH, "").strip().lower()
    if value in ("off", "0", "false", "no"):
        return True
    return value.startswith("off:") and name in {n.strip() for n in value[4:].split(",")}


def _is_plugins(registered: Any) -> bool:
    cls = registered if isinstance(registered, type) else type(registered)
    return registered is not None and cls.__module__.startswith(PLUGIN_PACKAGE)


def is_plugin_task(task: Any) -> bool:
    """Whether ``task`` (a task instance, or a ``--task`` name) is one of the plugin's."""
    if isinstance(task, str):
        from fairseq.tasks import TASK_REGISTRY

        task = TASK_REGISTRY.get(task)
    return _is_plugins(task)


def command_option(option: str, argv: Optional[list[str]] = None) -> Optional[str]:
    """The value of ``option`` (``--task``) on the command line (``OPTION NAME`` or
    ``OPTION=NAME``), if given."""
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    for i, arg in enumerate(argv):
        if arg == option and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(option + "="):
            return arg.split("=", 1)[1]
    return None


def in_fairseq_command() -> bool:
    """Whether this process is one of fairseq's commands (``fairseq-*`` or ``python -m fairseq_cli.*``)."""
    main = sys.modules.get("__main__")
    spec_name = getattr(getattr(main, "__spec__", None), "name", None) or ""
    program = os.path.normpath(sys.argv[0] or "")
    return (os.path.basename(program).startswith("fairseq-") or spec_name.startswith("fairseq_cli.")
            or "fairseq_cli" in program.split(os.sep))  # a worker that torch's spawn started


def serves(task: Any = None) -> bool:
    """Whether a change serves a call for ``task`` (None: no task at hand; module docstring)."""
    if all_tasks():
        return True
    if task is not None:
        return is_plugin_task(task)
    if not in_fairseq_command():
        return True
    return is_plugin_task(command_option("--task") or FAIRSEQ_DEFAULT_TASK)


def names_the_plugin(argv: Optional[list[str]] = None) -> bool:
    """Whether a command line (default: this process's) names a ``--task``, ``--arch`` or
    ``--criterion`` of the plugin (or ``FAIRSEQ_EXT_PATCH_ALL=1``)."""
    from fairseq.criterions import CRITERION_REGISTRY
    from fairseq.models import ARCH_MODEL_REGISTRY

    if all_tasks() or is_plugin_task(command_option("--task", argv)):
        return True
    arch, criterion = command_option("--arch", argv), command_option("--criterion", argv)
    return _is_plugins(ARCH_MODEL_REGISTRY.get(arch)) or _is_plugins(CRITERION_REGISTRY.get(criterion))

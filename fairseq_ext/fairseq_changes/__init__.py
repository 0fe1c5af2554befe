"""Every change the plugin makes to fairseq's (or Python's) behaviour: the table ``PATCHES``,
applied by ``install()`` (``install_at_import()``: the ``user-dir`` row). Each row's wrapper lives
in this folder; ``FAIRSEQ_EXT_PATCHES=off[:NAME,...]`` turns rows off. docs/fairseq-patches.md
shows the table (``python -m fairseq_ext.fairseq_changes``)."""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from dataclasses import dataclass
from typing import Any, Callable, Optional

from fairseq_ext.fairseq_changes import patch_scope, user_dir

MARK = "fairseq_ext_patch"  # the attribute naming the row that made a replacement
ROWS = "fairseq_ext_patches"  # the rows whose replacements wrap each other there, innermost first
PLUGIN_TASKS = "the plugin's tasks"
EVERY_TASK = "every task"
CHECKPOINTS = "the plugin's tasks, and checkpoints a plugin task trained"


def _function(spec: str) -> Callable:
    """``MODULE:FUNCTION`` of this folder, imported when a row is applied (reading the table
    imports no fairseq)."""
    module, function = spec.split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), function)


@dataclass(frozen=True)
class Patch:
    """``target`` (a dotted name) becomes ``make(original)`` (``make``: ``MODULE:FUNCTION`` of
    this folder). A ``scoped`` replacement runs where ``served`` (a spec; default
    ``patch_scope.serves()``) holds, the original elsewhere; an unscoped one decides itself."""

    name: str
    target: str
    make: str
    why: str
    serves: str = PLUGIN_TASKS
    served: Optional[str] = None
    scoped: bool = True
    at_import: bool = False
    since: str = "fairseq 0.12"


PATCHES: tuple[Patch, ...] = (
    Patch(
        "user-dir",
        "fairseq.utils.import_user_module",
        "user_dir:loading_this_plugin",
        "`--user-dir` naming this package registers the plugin even when the package was imported "
        "before (fairseq imports a user dir only once). No hook: fairseq has none for a user dir",
        "a `--user-dir` naming this package",
        scoped=False,
        at_import=True,
    ),
    Patch(
        "allow-list",
        "torch.serialization.add_safe_globals",
        "checkpoint_rows:allowing_fairseq_globals",
        "called once (nothing replaced): torch's allow-list gains `argparse.Namespace` and numpy's "
        "array reconstruction, which fairseq's checkpoints pickle. Hook: torch's own",
        EVERY_TASK,
        scoped=False,
        since="torch 2.6 (weights-only loading by default)",
    ),
    Patch(
        "checked-loading",
        "fairseq.checkpoint_utils.load_checkpoint_to_cpu",
        "checkpoint_rows:guarded_loader",
        "an unreadable, foreign, non-finite or non-checkpoint file is one line; a load for a task "
        "checks `--model-overrides`, the task family and the dictionaries. No hook: a task's "
        "`load_state_dict` gets no path, config or weights",
        CHECKPOINTS,
        scoped=False,
        since="fairseq 0.12, torch 2.6",
    ),
    Patch(
        "ensemble-task",
        "fairseq.checkpoint_utils.load_model_ensemble_and_task",
        "checkpoint_rows:ensemble_loading",
        "says which task the load is for (to `checked-loading`). No hook: fairseq hands "
        "`load_checkpoint_to_cpu` the path, not the task",
        CHECKPOINTS,
        scoped=False,
    ),
    Patch(
        "atomic-copy",
        "fairseq.file_io.PathManager.copy",
        "checkpoint_rows:atomic_copy",
        "`checkpoint_last.pt`/`checkpoint_best.pt` are copied to a temporary name and renamed: a "
        "kill never leaves a half file. No hook: `save_checkpoint` copies in place",
    ),
    Patch(
        "save-full-disk",
        "fairseq.checkpoint_utils.torch_persistent_save",
        "checkpoint_rows:naming_full_disk",
        "a full disk is one line naming the last good checkpoint at once (fairseq retried three "
        "times, with a traceback). No hook: nothing of the plugin runs around the write",
    ),
    Patch(
        "save-dir-check",
        "fairseq.checkpoint_utils.verify_checkpoint_directory",
        "checkpoint_rows:checking_save_dir",
        "a `--save-dir` that cannot be written is one line before the first update. No hook: "
        "fairseq checks it before the task exists",
    ),
    Patch(
        "resume-newest",
        "fairseq.checkpoint_utils.load_checkpoint",
        "checkpoint_rows:starting_safely",
        "when training starts the trainer's task becomes the task the process trains. For a "
        "plugin task: one training per `--save-dir` (`train.lock`), leftovers of killed saves "
        "removed, a missing or stale `checkpoint_last.pt` replaced by the newest complete "
        "checkpoint, a resume with other model options refused, a spent `--max-update` or "
        "`--max-epoch` one line. No hook: `begin_epoch` runs after fairseq read the checkpoint",
        scoped=False,
    ),
    Patch(
        "checked-paths-generate",
        "fairseq_cli.generate.main",
        "preflight:checking_generate",
        "for a plugin task every path fairseq-generate is given (`--path`, the data folder and "
        "its dictionaries, `--results-path`, `--sentencepiece-model`), `--seed` and "
        "`--model-overrides` are checked before any work; the results file has one writer and "
        "appears complete. No hook: fairseq-generate opens its files before the task exists",
        scoped=False,
    ),
    Patch(
        "checked-paths",
        "fairseq.distributed.utils.call_main",
        "preflight:checking_call_main",
        "the same for fairseq-train, -interactive (`--input`) and -validate, before a worker is "
        "spawned; fairseq-train's start too (`checkpoints.resuming`): `--restore-file`, "
        "`--finetune-from-model`, `--continue-once` and `--init-*-from` readable checkpoint "
        "files, no dangling `checkpoint_last.pt`, `--seed` in range, the data folder's "
        "dictionaries and splits whole (a resume with other model options: `resume-newest`). "
        "No hook: these commands build the model before they read `--input` or `--save-dir`",
        scoped=False,
    ),
    Patch(
        "save-on-ctrl-c",
        "fairseq_cli.train.validate_and_save",
        "interrupt:saving_on_ctrl_c",
        "the first Ctrl-C in fairseq-train (one process) saves `checkpoint_last.pt` after the "
        "update and says how to resume; a second stops at once. No hook: fairseq calls this "
        "after every update",
    ),
    Patch(
        "ctrl-c-in-workers",
        "torch.utils.data.DataLoader.__init__",
        "interrupt:ignoring_ctrl_c_in_workers",
        "a DataLoader worker ignores Ctrl-C, which the main process answers (a worker ended "
        "first made it fail with `DataLoader worker ... exited unexpectedly`). No hook: "
        "fairseq's `EpochBatchIterator` gives its DataLoader no `worker_init_fn`",
    ),
    Patch(
        "interactive-utf8",
        "fairseq_cli.interactive.buffered_read",
        "preflight:utf8_input",
        "input that is not UTF-8 is named by file and line, not a `UnicodeDecodeError`. No hook: "
        "the lines are decoded before the task sees them",
    ),
    Patch(
        "help-after-options",
        "fairseq.options.parse_args_and_arch",
        "cli_help:help_after_first_pass",
        "`--help` lists the options `--task`, `--arch` and `--criterion` add; a registry name "
        "that names nothing is one line with the closest name. No hook: fairseq answers both in "
        "its first pass",
        "a plugin `--task`, `--arch` or `--criterion`, or one that names nothing registered",
        served="cli_help:help_served",
    ),
    Patch(
        "quiet-commands",
        "fairseq.options.parse_args_and_arch",
        "quiet:quiet_commands",
        "progress lines, results, warnings and errors kept; fairseq's configuration and set-up "
        "log and Hydra's and torch's deprecation warnings dropped unless `--verbose`. No hook: "
        "fairseq logs the configuration before the task is set up",
        scoped=False,
    ),
    Patch(
        "quiet-setup",
        "fairseq.tasks.setup_task",
        "quiet:quiet_setup",
        "the same without fairseq's parser (`fairseq-hydra-train`, Python). Hook: a task's "
        "`setup_task` would serve; this keeps the change in this table",
        served="quiet:setup_served",
    ),
    Patch(
        "one-line-errors",
        "sys.excepthook",
        "one_line_errors:one_line_excepthook",
        "the plugin's input errors are one line; Ctrl-C in a command of the plugin's tasks ends "
        "it by SIGINT (status 130) without a traceback. Hook: Python's own",
        EVERY_TASK,
        scoped=False,
    ),
)


@dataclass(frozen=True)
class Gone:
    """A former row (until issue 77) and where its work is done now."""

    name: str
    target: str
    now: str


GONE: tuple[Gone, ...] = (
    Gone("results-file", "fairseq_cli.generate.open", "`checked-paths-generate`"),
    Gone("overrides-generate", "fairseq_cli.generate.ast", "`checked-paths-generate`"),
    Gone("overrides-interactive", "fairseq_cli.interactive.ast", "`checked-paths`"),
    Gone("trainer-task", "fairseq.trainer.Trainer.load_checkpoint", "`resume-newest`"),
    Gone("save-no-retries", "fairseq.checkpoint_utils._torch_persistent_save", "`save-full-disk`"),
)


def _owners(target: str) -> list[tuple[Any, str]]:
    """The objects whose attribute ``target`` names: a module or class; a ``fairseq_cli`` module
    only where imported (also as ``__main__``)."""
    path, attribute = target.rsplit(".", 1)
    if path.startswith("fairseq_cli."):
        found = [sys.modules.get(path), sys.modules.get("__main__")]
        found = [m for m in found if getattr(getattr(m, "__spec__", None), "name", None) == path]
        return [(m, attribute) for m in dict.fromkeys(found)]
    try:
        return [(importlib.import_module(path), attribute)]
    except ModuleNotFoundError:  # an attribute of a class: fairseq.file_io.PathManager.copy
        module_path, class_name = path.rsplit(".", 1)
        return [(getattr(importlib.import_module(module_path), class_name), attribute)]


def _scoped(original, replacement, served: Optional[Callable[..., bool]]):
    """``replacement`` where the call serves the plugin, ``original`` elsewhere."""

    @functools.wraps(replacement)
    def call(*args, **kwargs):
        serves = served(*args, **kwargs) if served else patch_scope.serves()
        return (replacement if serves else original)(*args, **kwargs)

    return call


def _apply(patch: Patch) -> None:
    for owner, attribute in _owners(patch.target):
        original = getattr(owner, attribute)
        rows = getattr(original, ROWS, ())
        replacement = None if patch.name in rows else _function(patch.make)(original)
        if replacement is None or replacement is original:  # applied, or a registration
            continue
        if patch.scoped:
            served = _function(patch.served) if patch.served else None
            replacement = _scoped(original, replacement, served)
        setattr(replacement, MARK, patch.name)
        setattr(replacement, ROWS, (*rows, patch.name))
        if isinstance(inspect.getattr_static(owner, attribute), staticmethod):
            replacement = staticmethod(replacement)
        setattr(owner, attribute, replacement)


def install() -> None:
    """Apply every row that ``FAIRSEQ_EXT_PATCHES`` does not turn off; a second call changes
    nothing, and applies the rows of a ``fairseq_cli`` module imported since."""
    for patch in PATCHES:
        if not patch_scope.patch_off(patch.name):
            _apply(patch)


def install_at_import() -> None:
    """The ``at_import`` rows, each once its target's module is imported (imports no fairseq)."""
    for patch in PATCHES:
        if patch.at_import and not patch_scope.patch_off(patch.name):
            module = patch.target.rsplit(".", 1)[0]
            user_dir.when_imported(module, functools.partial(_apply, patch))


def table() -> str:
    """``PATCHES`` and ``GONE`` as Markdown (the block of ``docs/fairseq-patches.md``)."""
    rows = [
        f"{len(PATCHES)} rows, each a function (or a method of fairseq's) wrapped where fairseq "
        f"has no hook, or a hook itself (`allow-list`, `one-line-errors`); {len(GONE)} rows gone, "
        "none left that replaces a module object or shadows a builtin.",
        "",
        "| name | what is changed | why, and the hook that is missing | needed since | serves by "
        "default | turn off |",
        "|---|---|---|---|---|---|",
    ]
    rows += [
        f"| `{p.name}` | `{p.target}` | {p.why} | {p.since} | {p.serves} | "
        f"`FAIRSEQ_EXT_PATCHES=off:{p.name}` |"
        for p in PATCHES
    ]
    rows += ["", "| gone | what it replaced | where its work is now |", "|---|---|---|"]
    rows += [f"| `{g.name}` | `{g.target}` | {g.now} |" for g in GONE]
    return "\n".join(rows) + "\n"

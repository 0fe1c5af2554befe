"""Every change the plugin makes to fairseq's (or Python's) behaviour: the table ``PATCHES``,
applied by ``install()`` (and ``install_at_import()`` for the ``user-dir`` row); each row's wrapper
lives in this folder and calls checks that live where they belong. Whom a change serves is
``patch_scope``'s; ``FAIRSEQ_EXT_PATCHES=off[:NAME,...]`` turns rows off. docs/fairseq-patches.md
shows the table (``python -m fairseq_ext.fairseq_changes``) and why."""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from dataclasses import dataclass
from typing import Any, Callable, Optional

from fairseq_ext.fairseq_changes import import_watch, patch_scope

MARK = "fairseq_ext_patch"  # the attribute naming the row that made a replacement
ROWS = "fairseq_ext_patches"  # the rows whose replacements wrap each other there, innermost first
PLUGIN_TASKS = "the plugin's tasks"
EVERY_TASK = "every task"
CHECKPOINTS = "the plugin's tasks, and checkpoints a plugin task trained"


@dataclass(frozen=True)
class Patch:
    """One change: ``target`` (a dotted name) becomes ``make(original)``. A ``scoped`` replacement
    runs where ``served(...)`` holds (default ``patch_scope.serves()``), the original elsewhere; an
    unscoped one decides itself. An ``at_import`` row is applied when the package is imported."""

    name: str
    target: str
    why: str
    since: str
    serves: str
    make: Callable[[Any], Any]
    served: Optional[Callable[..., bool]] = None
    scoped: bool = True
    at_import: bool = False


def _wrapped_by(spec: str) -> Callable[[Any], Any]:
    """The row's ``make``: ``MODULE:FUNCTION`` called with fairseq's original. The module is
    imported when the row is applied, so that reading this table imports no fairseq (the
    package's ``quiet`` hushes fairseq before it is imported)."""

    def make(original):
        module, function = spec.split(":")
        return getattr(importlib.import_module(module), function)(original)

    make.__qualname__ = spec
    return make


def _replaced_by(spec: str) -> Callable[[Any], Any]:
    """The row's ``make``: ``MODULE:FUNCTION`` itself in place of fairseq's original."""

    def make(original):
        module, function = spec.split(":")
        return getattr(importlib.import_module(module), function)

    make.__qualname__ = spec
    return make


def _served_by(spec: str) -> Callable[..., bool]:
    """A row's ``served``: ``MODULE:FUNCTION``, imported when called."""

    def served(*args, **kwargs) -> bool:
        module, function = spec.split(":")
        return getattr(importlib.import_module(module), function)(*args, **kwargs)

    return served


def _help_served(parser, input_args=None, *args, **kwargs) -> bool:
    from fairseq_ext.fairseq_changes import cli_help

    return patch_scope.names_the_plugin(input_args) or cli_help.names_an_unknown_choice(input_args)


def _allow_list(add_safe_globals):
    from fairseq_ext.checkpoints.allow_list import SAFE_CHECKPOINT_GLOBALS

    add_safe_globals(list(SAFE_CHECKPOINT_GLOBALS))
    return add_safe_globals


PATCHES: tuple[Patch, ...] = (
    Patch(
        "user-dir",
        "fairseq.utils.import_user_module",
        "`--user-dir` naming this package registers the plugin even when the package was "
        "imported before (by `fairseq_ext.masking`, the hub): fairseq imports a user dir's "
        "`tasks` and `models` only on its first import of the package, and `--task cmlm_hybrid` "
        "was an invalid choice. Applied when the package is imported, at once or when "
        "`fairseq.utils` is. No hook: fairseq has none for loading a user dir",
        "fairseq 0.12",
        "a `--user-dir` naming this package",
        _wrapped_by("fairseq_ext.fairseq_changes.user_dir:loading_this_plugin"),
        scoped=False,
        at_import=True,
    ),
    Patch(
        "allow-list",
        "torch.serialization.add_safe_globals",
        "called once (nothing replaced): torch's allow-list gains `argparse.Namespace` and "
        "numpy's int64 array reconstruction, which fairseq's checkpoints pickle; without them "
        "torch refuses every fairseq 0.12 checkpoint. Hook: torch's own extension point",
        "torch 2.6 (weights-only loading by default)",
        EVERY_TASK,
        _allow_list,
        scoped=False,
    ),
    Patch(
        "checked-loading",
        "fairseq.checkpoint_utils.load_checkpoint_to_cpu",
        "an unreadable, foreign, non-finite or non-checkpoint file is one line; a load for a "
        "task checks `--model-overrides`, the task family and the dictionaries. A load for "
        "fairseq's own task runs fairseq's loader and checks only a checkpoint a plugin task "
        "trained. No hook: a task's `load_state_dict` gets the `task_state` only (no path, "
        "config or weights) and is not called on resume; a model's `upgrade_state_dict_named` "
        "runs after fairseq has upgraded (or failed on) the file, and only for the plugin's "
        "models",
        "fairseq 0.12, torch 2.6",
        CHECKPOINTS,
        _wrapped_by("fairseq_ext.fairseq_changes.checkpoint_loading:guarded_loader"),
        scoped=False,
    ),
    Patch(
        "ensemble-task",
        "fairseq.checkpoint_utils.load_model_ensemble_and_task",
        "says which task the load is for (to `checked-loading`; a training says it in "
        "`resume-newest`); behaviour unchanged. No hook: fairseq hands `load_checkpoint_to_cpu` "
        "the path and the overrides, not the task",
        "fairseq 0.12",
        CHECKPOINTS,
        _wrapped_by("fairseq_ext.fairseq_changes.checkpoint_loading:ensemble_loading"),
        scoped=False,
    ),
    Patch(
        "atomic-copy",
        "fairseq.file_io.PathManager.copy",
        "`checkpoint_last.pt`/`checkpoint_best.pt` are copied to a temporary name and renamed, "
        "leftovers of killed copies removed: a kill never leaves a half file. No hook: "
        "`save_checkpoint` copies in place, and no method of the task or the model runs around "
        "the copy",
        "fairseq 0.12",
        PLUGIN_TASKS,
        _wrapped_by("fairseq_ext.fairseq_changes.checkpoint_saving:atomic_copy"),
    ),
    Patch(
        "save-full-disk",
        "fairseq.checkpoint_utils.torch_persistent_save",
        "a local checkpoint is written as fairseq writes it (`.tmp`, renamed into place) in one "
        "attempt: a full disk is one line naming the last good checkpoint, at once (fairseq "
        "retried three times and logged a traceback), and the partial file is removed; every "
        "other failure gets fairseq's save. No hook: the task's `state_dict` runs before the "
        "write, nothing of the plugin after it",
        "fairseq 0.12",
        PLUGIN_TASKS,
        _wrapped_by("fairseq_ext.fairseq_changes.checkpoint_saving:naming_full_disk"),
    ),
    Patch(
        "save-dir-check",
        "fairseq.checkpoint_utils.verify_checkpoint_directory",
        "a `--save-dir` that cannot be written is one line before the first update, not a "
        "warning and a traceback (fairseq-train's `checked-paths` says so earlier; this serves "
        "fairseq-hydra-train and Python drivers). No hook: `fairseq_cli.train.main` calls it "
        "before it sets up the task, and the task never sees `--save-dir`",
        "fairseq 0.12",
        PLUGIN_TASKS,
        _wrapped_by("fairseq_ext.fairseq_changes.checkpoint_saving:checking_save_dir"),
    ),
    Patch(
        "resume-newest",
        "fairseq.checkpoint_utils.load_checkpoint",
        "when training starts, for every task: the trainer's task becomes the task the process "
        "trains (`patch_scope`) and the task each checkpoint loaded here is checked against "
        "(`checked-loading`). For a plugin task the run holds the folder's one-writer lock "
        "(`train.lock`: pid, host, start time; a second training on it stops with one line "
        "naming the first), leftovers of killed saves are removed, a missing or stale "
        "`checkpoint_last.pt` gives way to the newest complete checkpoint, and a checkpoint "
        "already at `--max-update` (or past `--max-epoch`) ends the run with one line, nothing "
        "trained or written (fairseq trained one more update). No hook: a task's `begin_epoch` "
        "runs after fairseq has read the checkpoint and built the epoch iterator, and past "
        "`--max-epoch` not at all",
        "fairseq 0.12",
        PLUGIN_TASKS,
        _wrapped_by("fairseq_ext.fairseq_changes.checkpoint_saving:starting_safely"),
        scoped=False,
    ),
    Patch(
        "checked-paths-generate",
        "fairseq_cli.generate.main",
        "the task of `cfg` is the command's (`patch_scope`). For a plugin task every path "
        "fairseq-generate is given (`--path` and each `:`-separated part, the data folder and "
        "its dictionaries, `--results-path`, `--sentencepiece-model`) is checked before any "
        "work, and `--model-overrides` is a Python literal dict: a missing, unreadable or "
        "unwritable path, a file for a folder, a cut dictionary or overrides that are no dict is "
        "one line (`fairseq_ext.fairseq_changes.preflight`); the `--results-path` file has one "
        "writer (a lock) and is moved into place complete (fairseq-generate writes it in a "
        "folder of its own, `output_files.generating_exclusively`). No hook: fairseq-generate "
        "makes `--results-path`, opens its file and reads `--model-overrides` before it sets up "
        "the task, and `setup_task` sees the task's options only",
        "fairseq 0.12",
        PLUGIN_TASKS,
        _wrapped_by("fairseq_ext.fairseq_changes.preflight:checking_generate"),
        scoped=False,
    ),
    Patch(
        "checked-paths",
        "fairseq.distributed.utils.call_main",
        "the same for fairseq-train (`--save-dir`), fairseq-interactive (`--input`, "
        "`--model-overrides`) and fairseq-validate, before a worker is spawned; the task of "
        "`cfg` is the command's, in the ranks fairseq spawns too. No hook: these commands build "
        "the model before they read `--input` or write `--save-dir`",
        "fairseq 0.12",
        PLUGIN_TASKS,
        _wrapped_by("fairseq_ext.fairseq_changes.preflight:checking_call_main"),
        scoped=False,
    ),
    Patch(
        "save-on-ctrl-c",
        "fairseq_cli.train.validate_and_save",
        "the first Ctrl-C in fairseq-train ends the update under way, saves the checkpoints "
        "fairseq saves mid-epoch (`checkpoint_last.pt`) and says so and that the same command "
        "resumes from it, then ends as Ctrl-C does (status 130); a second Ctrl-C stops at once. "
        "fairseq ended at once, saving nothing and saying nothing (every update since the last "
        "save lost). A training of one process only: the ranks of a distributed one would stop "
        "at different updates. No hook: fairseq calls this after every update, with the trainer "
        "and the epoch iterator that a save needs, and nothing of the task runs there",
        "fairseq 0.12",
        PLUGIN_TASKS,
        _wrapped_by("fairseq_ext.fairseq_changes.interrupt:saving_on_ctrl_c"),
    ),
    Patch(
        "interactive-utf8",
        "fairseq_cli.interactive.buffered_read",
        "input that is not UTF-8 is named by file and line, not a `UnicodeDecodeError`. No hook: "
        "the lines are decoded before anything of the task runs; the task sees tokens only",
        "fairseq 0.12",
        PLUGIN_TASKS,
        _replaced_by("fairseq_ext.data.interactive_input:buffered_read"),
    ),
    Patch(
        "help-after-options",
        "fairseq.options.parse_args_and_arch",
        "`--help` is printed after the options of `--task`, `--arch` and `--criterion` are "
        "added, so it lists them; a `--task`, `--arch` or `--criterion` that names nothing "
        "registered is one line with the closest name (`did you mean 'cmlm_hybrid'?`), not the "
        "whole usage and every choice. No hook: fairseq prints both in its first pass",
        "fairseq 0.12",
        "a plugin `--task`, `--arch` or `--criterion`, or one that names nothing registered",
        _wrapped_by("fairseq_ext.fairseq_changes.cli_help:help_after_first_pass"),
        _help_served,
    ),
    Patch(
        "quiet-commands",
        "fairseq.options.parse_args_and_arch",
        "a command of the plugin's tasks keeps its progress lines, results, warnings and errors "
        "and drops fairseq's configuration log, model and set-up lines and Hydra's and torch's "
        "deprecation warnings (`quiet.hush`), unless `--verbose` (an option of every plugin "
        "task; the ranks a command starts inherit it). No hook: fairseq builds the "
        "configuration (where Hydra warns) and logs it before it sets up the task, and a task's "
        "`add_args` runs before `--verbose` is parsed",
        "fairseq 0.12",
        PLUGIN_TASKS,
        _wrapped_by("fairseq_ext.fairseq_changes.quiet:quiet_commands"),
        scoped=False,
    ),
    Patch(
        "quiet-setup",
        "fairseq.tasks.setup_task",
        "the same for a plugin task set up without fairseq's option parser "
        "(`fairseq-hydra-train`, Python code); `FAIRSEQ_EXT_VERBOSE=1` keeps everything. Hook: "
        "a task's `setup_task` would serve as well; wrapping fairseq's keeps the change in this "
        "table, with the others",
        "fairseq 0.12",
        PLUGIN_TASKS,
        _wrapped_by("fairseq_ext.fairseq_changes.quiet:quiet_setup"),
        _served_by("fairseq_ext.fairseq_changes.quiet:setup_served"),
    ),
    Patch(
        "one-line-errors",
        "sys.excepthook",
        "the plugin's own input errors (`FairseqExtError`) are one line; Ctrl-C in a command of "
        "the plugin's tasks ends it without a `KeyboardInterrupt` traceback (by SIGINT: status "
        "130); every other exception goes to Python's hook unchanged. Hook: `sys.excepthook` is "
        "Python's documented hook for an uncaught exception (fairseq's commands have none of "
        "their own)",
        "fairseq 0.12",
        EVERY_TASK,
        _wrapped_by("fairseq_ext.fairseq_changes.one_line_errors:one_line_excepthook"),
        scoped=False,
    ),
)


@dataclass(frozen=True)
class Gone:
    """A row of the table until issue 77, whose work is now done by another row, at a point where
    fairseq hands over the task or the configuration: what it replaced, and where its work is
    now."""

    name: str
    target: str
    now: str


GONE: tuple[Gone, ...] = (
    Gone(
        "results-file",
        "fairseq_cli.generate.open",
        "the builtin `open` was shadowed in fairseq-generate's module; now "
        "`checked-paths-generate` takes the lock and gives fairseq-generate a `--results-path` "
        "folder of its own, whose file it moves into place",
    ),
    Gone(
        "overrides-generate",
        "fairseq_cli.generate.ast",
        "the `ast` module object was replaced; now `checked-paths-generate` checks "
        "`cfg.common_eval.model_overrides` before fairseq's `ast.literal_eval` reads it",
    ),
    Gone(
        "overrides-interactive",
        "fairseq_cli.interactive.ast",
        "the same; now `checked-paths` (fairseq-interactive's `call_main`) checks it",
    ),
    Gone(
        "trainer-task",
        "fairseq.trainer.Trainer.load_checkpoint",
        "said which task a resumed or fine-tuned checkpoint is for; now `resume-newest`, which "
        "fairseq calls with the trainer, says it for every checkpoint loaded when training starts",
    ),
    Gone(
        "save-no-retries",
        "fairseq.checkpoint_utils._torch_persistent_save",
        "a private function of fairseq's, replaced so that a full disk stopped its retries; now "
        "`save-full-disk` writes a local checkpoint in one attempt itself and hands any other "
        "failure to fairseq's save",
    ),
)


def _scoped(original, replacement, served: Optional[Callable[..., bool]]):
    """``replacement`` where the call serves the plugin, ``original`` elsewhere."""

    @functools.wraps(replacement)
    def call(*args, **kwargs):
        serves = served(*args, **kwargs) if served is not None else patch_scope.serves()
        return (replacement if serves else original)(*args, **kwargs)

    return call


def _owners(target: str) -> list[tuple[Any, str]]:
    """The objects whose attribute ``target`` names, and the attribute: the module or class of a
    dotted name; for ``fairseq_cli`` modules, only where imported (also as ``__main__``)."""
    path, attribute = target.rsplit(".", 1)
    if path == "sys":
        return [(sys, attribute)]
    if path.startswith("fairseq_cli."):
        found = [
            m
            for m in (sys.modules.get(path), sys.modules.get("__main__"))
            if m is not None and getattr(getattr(m, "__spec__", None), "name", None) == path
        ]
        return [(m, attribute) for m in dict.fromkeys(found)]
    try:
        return [(importlib.import_module(path), attribute)]
    except ModuleNotFoundError:  # an attribute of a class: fairseq.file_io.PathManager.copy
        module_path, class_name = path.rsplit(".", 1)
        return [(getattr(importlib.import_module(module_path), class_name), attribute)]


def _apply(patch: Patch) -> None:
    for owner, attribute in _owners(patch.target):
        original = getattr(owner, attribute)
        rows = getattr(original, ROWS, ())
        if patch.name in rows:
            continue
        replacement = patch.make(original)
        if replacement is original:  # a registration, nothing replaced
            continue
        if patch.scoped and callable(replacement):
            replacement = _scoped(original, replacement, patch.served)
        setattr(replacement, MARK, patch.name)
        setattr(replacement, ROWS, (*rows, patch.name))
        if inspect.isclass(owner) and isinstance(
            inspect.getattr_static(owner, attribute), staticmethod
        ):
            replacement = staticmethod(replacement)
        setattr(owner, attribute, replacement)


def install() -> None:
    """Apply every row of ``PATCHES`` that ``FAIRSEQ_EXT_PATCHES`` does not turn off (a second
    call changes nothing; a ``fairseq_cli`` module imported later is changed by the next call)."""
    for patch in PATCHES:
        if not patch_scope.patch_off(patch.name):
            _apply(patch)


def install_at_import() -> None:
    """When the package is imported: the ``at_import`` rows, each once its target's module is
    imported (this imports no fairseq)."""
    for patch in PATCHES:
        if patch.at_import and not patch_scope.patch_off(patch.name):
            module = patch.target.rsplit(".", 1)[0]
            import_watch.when_imported(module, functools.partial(_apply, patch))


def table() -> str:
    """``PATCHES``, and the rows ``GONE``, as Markdown (the block of
    ``docs/fairseq-patches.md``)."""
    header = (
        "| name | what is changed | why, and the hook that is missing | needed since | serves by "
        "default | turn off |"
    )
    rows = [
        f"{len(PATCHES)} rows, each a function (or a method of fairseq's) wrapped where fairseq "
        f"has no hook, or a hook itself (`allow-list`, `one-line-errors`); {len(GONE)} rows gone, "
        "none left that replaces a module object or shadows a builtin.",
        "",
        header,
        "|---|---|---|---|---|---|",
    ]
    for p in PATCHES:
        rows.append(
            f"| `{p.name}` | `{p.target}` | {p.why} | {p.since} | {p.serves} | "
            f"`FAIRSEQ_EXT_PATCHES=off:{p.name}` |"
        )
    rows += ["", "| gone | what it replaced | where its work is now |", "|---|---|---|"]
    rows += [f"| `{g.name}` | `{g.target}` | {g.now} |" for g in GONE]
    return "\n".join(rows) + "\n"

"""The rows about checkpoints (``allow-list`` to ``resume-newest``): fairseq's loading, saving and
resuming with the checks of ``checkpoints.checks``, ``saving`` and ``resuming``."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import shutil
from typing import Iterator, Optional

from fairseq_ext.checkpoints import checks, resuming, saving
from fairseq_ext.checkpoints.loading import SAFE_CHECKPOINT_GLOBALS, safe_load
from fairseq_ext.common.errors import FairseqExtError, full_disk, note
from fairseq_ext.common.paths import require_writable_folder
from fairseq_ext.fairseq_changes import patch_scope

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
        if not patch_scope.serves(task):
            state = load_fn(path, arg_overrides, load_on_all_ranks)
            if (
                isinstance(state, dict)
                and "model" in state
                and patch_scope.is_plugin_task(checks.trained_task(state))
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


def atomic_copy(copy_fn):
    """``PathManager.copy`` for local files: copy to ``DST.partial-<pid>`` and ``os.replace``
    it (atomic on POSIX), after removing the leftovers of killed copies."""

    @functools.wraps(copy_fn)
    def copy(src_path: str, dst_path: str, overwrite: bool = False) -> bool:
        if "://" in src_path or "://" in dst_path:
            return copy_fn(src_path, dst_path, overwrite=overwrite)
        if os.path.exists(dst_path) and not overwrite:
            return False
        saving.remove_leftovers(os.path.dirname(os.path.abspath(dst_path)))
        tmp = f"{dst_path}.partial-{os.getpid()}"
        try:
            shutil.copyfile(src_path, tmp)
            os.replace(tmp, dst_path)
        except OSError as exc:
            if full_disk(exc):
                raise saving.no_space_error(dst_path) from None
            raise
        finally:
            if os.path.lexists(tmp):
                os.remove(tmp)
        return True

    return copy


def naming_full_disk(save_fn):
    """fairseq's ``torch_persistent_save(obj, filename)``: a local file written as fairseq writes
    it (``filename.tmp``, renamed into place) in one attempt; a full disk is one line and the
    ``.tmp`` removed; any other failure, an asynchronous write and a URL get fairseq's save."""

    @functools.wraps(save_fn)
    def torch_persistent_save(obj, filename, async_write: bool = False):
        if async_write or not isinstance(filename, str) or "://" in filename:
            return save_fn(obj, filename, async_write=async_write)
        import torch

        tmp = filename + ".tmp"
        try:
            with open(tmp, "wb") as f:
                torch.save(obj, f)
            os.replace(tmp, filename)
        except Exception as exc:  # OSError, or torch's RuntimeError closing its archive after one
            if not full_disk(exc):
                return save_fn(obj, filename, async_write=async_write)
            if os.path.lexists(tmp):
                os.remove(tmp)
            raise saving.no_space_error(filename) from None

    return torch_persistent_save


def starting_safely(load_fn):
    """fairseq's ``load_checkpoint(cfg, trainer)``, run when training starts: the trainer's task
    becomes the task this process trains and the one each checkpoint loaded here is checked
    against. For a task the change serves: the ``--save-dir`` lock (first rank), leftovers
    removed, a missing or older ``checkpoint_last.pt`` restored and resumed only with the model
    options it was trained with, fairseq's load, then the end of a spent budget."""

    @functools.wraps(load_fn)
    def load_checkpoint(cfg, trainer, **passthrough_args):
        patch_scope.training(trainer.task)
        with loading_for(trainer.task):
            if not patch_scope.serves(trainer.task):
                return load_fn(cfg, trainer, **passthrough_args)
            if os.path.isdir(cfg.save_dir) and "://" not in cfg.save_dir:
                if trainer.data_parallel_rank == 0:
                    saving.hold(cfg.save_dir)
                    for path in saving.remove_leftovers(cfg.save_dir, fairseq_tmp=True):
                        note(f"removed {path}, left by a save that was interrupted")
                if cfg.restore_file == resuming.DEFAULT_RESTORE:
                    suffix = trainer.checkpoint_suffix or ""
                    saving.restore_last(cfg.save_dir, suffix)
                    last = os.path.join(cfg.save_dir, f"checkpoint_last{suffix}.pt")
                    resuming.check_same_model(cfg.save_dir, last, trainer.cfg.model)
            extra_state, epoch_itr = load_fn(cfg, trainer, **passthrough_args)
            resuming.stop_if_spent(cfg, trainer, extra_state, epoch_itr)
            return extra_state, epoch_itr

    return load_checkpoint


def checking_save_dir(verify_fn):
    """fairseq's ``verify_checkpoint_directory(save_dir)`` (first rank, before the first update):
    a folder that cannot be written is one line, not a warning and a traceback."""

    @functools.wraps(verify_fn)
    def verify_checkpoint_directory(save_dir: str) -> None:
        require_writable_folder(save_dir, "--save-dir", "checkpoints")
        return verify_fn(save_dir)

    return verify_checkpoint_directory

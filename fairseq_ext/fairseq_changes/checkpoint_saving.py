"""The ``atomic-copy``, ``save-full-disk``, ``resume-newest`` and ``save-dir-check`` rows:
fairseq's checkpoint saving and resuming with the checks of ``checkpoints.saving``,
``save_dir_lock``, ``resume_budget`` and ``resuming`` (docs/fairseq-patches.md)."""

from __future__ import annotations

import functools
import os
import shutil

from fairseq_ext.checkpoints import resume_budget, resuming, save_dir_lock
from fairseq_ext.checkpoints.saving import no_space_error, remove_leftovers, restore_last
from fairseq_ext.common.errors import full_disk, note
from fairseq_ext.common.paths import require_writable_folder
from fairseq_ext.fairseq_changes import checkpoint_loading, patch_scope


def atomic_copy(copy_fn):
    """``PathManager.copy`` for local files: copy to ``DST.partial-<pid>`` and ``os.replace``
    it (atomic on POSIX), after removing the leftovers of killed copies."""

    @functools.wraps(copy_fn)
    def copy(src_path: str, dst_path: str, overwrite: bool = False) -> bool:
        if "://" in src_path or "://" in dst_path:
            return copy_fn(src_path, dst_path, overwrite=overwrite)
        if os.path.exists(dst_path) and not overwrite:
            return False
        remove_leftovers(os.path.dirname(os.path.abspath(dst_path)))
        tmp = f"{dst_path}.partial-{os.getpid()}"
        try:
            shutil.copyfile(src_path, tmp)
            os.replace(tmp, dst_path)
        except OSError as exc:
            if full_disk(exc):
                raise no_space_error(dst_path) from None
            raise
        finally:
            if os.path.lexists(tmp):
                os.remove(tmp)
        return True

    return copy


def naming_full_disk(save_fn):
    """fairseq's ``torch_persistent_save(obj, filename)``: a local file is written as fairseq
    writes it (``filename.tmp``, then renamed into place), in one attempt, so that a full disk is
    one line naming the last good checkpoint at once (fairseq retried three times and logged a
    traceback) and the partial ``filename.tmp`` is removed; any other failure, an asynchronous
    write and a URL get fairseq's own save, retries and all."""

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
            raise no_space_error(filename) from None

    return torch_persistent_save


def starting_safely(load_fn):
    """fairseq's ``load_checkpoint(cfg, trainer)``, run when training starts: for every task, the
    trainer's task becomes the task this process trains (``patch_scope.training``) and the task
    each checkpoint fairseq loads here is checked against (``checkpoint_loading.loading_for``). For
    a
    task it serves (``_start``): hold the ``--save-dir`` lock (first rank: ``save_dir_lock.hold``),
    remove leftovers, restore a missing ``checkpoint_last.pt``, load as fairseq does, then end the
    run if the checkpoint has spent its budget (``resume_budget``)."""

    @functools.wraps(load_fn)
    def load_checkpoint(cfg, trainer, **passthrough_args):
        patch_scope.training(trainer.task)
        with checkpoint_loading.loading_for(
            trainer.task
        ):  # a resumed or fine-tuned checkpoint is for it
            if not patch_scope.serves(trainer.task):
                return load_fn(cfg, trainer, **passthrough_args)
            return _start(load_fn, cfg, trainer, passthrough_args)

    return load_checkpoint


def _start(load_fn, cfg, trainer, passthrough_args):
    """The lock, the leftovers and ``checkpoint_last.pt`` first (resumed only with the model options
    it was trained with, as the built model left them), fairseq's load, then the budget."""
    if os.path.isdir(cfg.save_dir) and "://" not in cfg.save_dir:
        if trainer.data_parallel_rank == 0:
            save_dir_lock.hold(cfg.save_dir)
            for path in remove_leftovers(cfg.save_dir, fairseq_tmp=True):
                note(f"removed {path}, left by a save that was interrupted")
        if cfg.restore_file == "checkpoint_last.pt":
            suffix = trainer.checkpoint_suffix or ""
            restore_last(cfg.save_dir, suffix)
            last = os.path.join(cfg.save_dir, f"checkpoint_last{suffix}.pt")
            resuming.check_same_model(cfg.save_dir, last, trainer.cfg.model)
    extra_state, epoch_itr = load_fn(cfg, trainer, **passthrough_args)
    resume_budget.stop_if_spent(cfg, trainer, extra_state, epoch_itr)
    return extra_state, epoch_itr


def checking_save_dir(verify_fn):
    """fairseq's ``verify_checkpoint_directory(save_dir)``, run before the first update (by the
    first rank only): a folder that cannot be written (read-only filesystem, no permission) is one
    line, not a warning and a traceback."""

    @functools.wraps(verify_fn)
    def verify_checkpoint_directory(save_dir: str) -> None:
        require_writable_folder(save_dir, "--save-dir", "checkpoints")
        return verify_fn(save_dir)

    return verify_checkpoint_directory

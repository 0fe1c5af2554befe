"""The ``atomic-copy``, ``save-full-disk``, ``save-dir-check`` and ``resume-newest`` rows:
fairseq's checkpoint saving and resuming with the checks of ``checkpoints.saving`` and
``checkpoints.resuming`` (docs/fairseq-patches.md)."""

from __future__ import annotations

import functools
import os
import shutil

from fairseq_ext.checkpoints import resuming, saving
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
        with checkpoint_loading.loading_for(trainer.task):
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

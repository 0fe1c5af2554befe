"""Saving checkpoints so that a kill or a full disk loses no more than the interval since the
last complete one, and starting a training safely."""

from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import zipfile
from typing import Optional

from fairseq_ext.checkpoints import fairseq_loading, resume_budget, resuming, save_dir_lock
from fairseq_ext.common.errors import NoSpaceError, full_disk, note
from fairseq_ext.common.paths import require_writable_folder
from fairseq_ext.fairseq_changes import patch_scope
from fairseq_ext.fairseq_changes.output_files import process_alive

_PARTIAL = re.compile(r"\.partial-(\d+)$")
_NUMBERED = re.compile(
    r"checkpoint(\d+|_\d+_\d+)(-[\w-]+)?\.pt$"
)  # what fairseq writes before its copies
_SAVED = re.compile(
    r"checkpoint(\d+|_\d+_\d+|_best|_last)(-[\w-]+)?\.pt$"
)  # (-suffix: sharded saves)


def remove_leftovers(folder: str, *, fairseq_tmp: bool = False) -> list[str]:
    """Remove (and return) ``folder``'s leftovers of killed saves."""
    removed = []
    for path in sorted(glob.glob(os.path.join(glob.escape(folder), "*.partial-*"))):
        match = _PARTIAL.search(path)
        if match and not process_alive(int(match.group(1))):
            removed.append(path)
    if fairseq_tmp:  # regular files only: a killed save leaves one, a link is the user's
        removed += sorted(
            p
            for p in glob.glob(os.path.join(glob.escape(folder), "*.pt.tmp"))
            if not os.path.islink(p)
        )
    for path in removed:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
    return removed


def is_complete(path: str) -> bool:
    """A torch checkpoint (a zip archive) whose central directory is readable."""
    try:
        with zipfile.ZipFile(path) as archive:
            return bool(archive.namelist())
    except (zipfile.BadZipFile, OSError):
        return False


def newest_complete_checkpoint(
    folder: str, exclude: tuple[str, ...] = (), pattern=None
) -> Optional[str]:
    """The newest complete checkpoint of ``folder`` named as fairseq-train names them."""
    pattern = pattern or _SAVED
    found = [
        p
        for p in glob.glob(os.path.join(glob.escape(folder), "checkpoint*.pt"))
        if pattern.match(os.path.basename(p)) and os.path.basename(p) not in exclude
    ]
    for path in sorted(found, key=lambda p: (os.path.getmtime(p), p), reverse=True):
        if is_complete(path):
            return path
    return None


def _last_good(folder: str, writing: str) -> str:
    last = os.path.join(folder, "checkpoint_last.pt")
    if os.path.abspath(last) != os.path.abspath(writing) and is_complete(last):
        return last
    found = newest_complete_checkpoint(folder, exclude=(os.path.basename(writing),))
    return found or "none yet (nothing complete has been saved in this folder)"


def no_space_error(final: str) -> NoSpaceError:
    folder = os.path.dirname(os.path.abspath(final))
    return NoSpaceError(
        f"no space left on the device while saving {final}; the last good checkpoint is "
        f"{_last_good(folder, final)}. Free space (or keep fewer checkpoints: "
        "--keep-interval-updates N, --keep-last-epochs N, --no-epoch-checkpoints) and run the same "
        "command again to resume from it"
    )


def atomic_copy(copy_fn):
    """``PathManager.copy`` for local files: copy to ``DST.partial-<pid>``, then ``os.replace``."""

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
    """fairseq's ``torch_persistent_save``, where a full disk is one line naming the last good
    checkpoint."""

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


def restore_last(save_dir: str, suffix: str = "") -> None:
    """Put the newest complete checkpoint in place of a missing or older ``checkpoint_last.pt``."""
    last = os.path.join(save_dir, f"checkpoint_last{suffix}.pt")
    if not os.path.isdir(save_dir):
        return
    if not os.path.exists(last):
        found = newest_complete_checkpoint(save_dir, exclude=(os.path.basename(last),))
        why = f"{last} is missing (a run killed while writing it?)"
    else:
        found = newest_complete_checkpoint(save_dir, pattern=_NUMBERED)
        if (
            found is None
            or not is_complete(last)
            or os.path.getmtime(last) >= os.path.getmtime(found)
        ):
            return
        why = f"{last} is older than {os.path.basename(found)} (a run killed before copying it?)"
    if found is None:
        return
    tmp = f"{last}.partial-{os.getpid()}"
    try:
        os.link(found, tmp)
    except OSError:
        shutil.copyfile(found, tmp)
    os.replace(tmp, last)
    newest = os.path.basename(found)
    note(f"{why}: resuming from {newest}, the newest complete checkpoint in {save_dir}")


def starting_safely(load_fn):
    """fairseq's ``load_checkpoint(cfg, trainer)``, checking against the trainer's task."""

    @functools.wraps(load_fn)
    def load_checkpoint(cfg, trainer, **passthrough_args):
        patch_scope.training(trainer.task)
        with fairseq_loading.loading_for(
            trainer.task
        ):  # a resumed or fine-tuned checkpoint is for it
            if not patch_scope.serves(trainer.task):
                return load_fn(cfg, trainer, **passthrough_args)
            return _start(load_fn, cfg, trainer, passthrough_args)

    return load_checkpoint


def _start(load_fn, cfg, trainer, passthrough_args):
    """The lock, the leftovers, ``checkpoint_last.pt``, fairseq's load, then the budget."""
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
    """fairseq's ``verify_checkpoint_directory``: a folder that cannot be written is one line."""

    @functools.wraps(verify_fn)
    def verify_checkpoint_directory(save_dir: str) -> None:
        require_writable_folder(save_dir, "--save-dir", "checkpoints")
        return verify_fn(save_dir)

    return verify_checkpoint_directory

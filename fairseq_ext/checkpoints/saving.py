"""Saving checkpoints so that a kill or a full disk loses no more than the interval since the
last complete one, and one training per ``--save-dir`` (``hold``: ``SAVE_DIR/train.lock`` names
its pid, host and start time; a lock left by a killed run is taken over). Applied by
``fairseq_changes.checkpoint_rows``."""

from __future__ import annotations

import atexit
import glob
import os
import re
import shutil
import socket
import zipfile
from typing import Optional

from fairseq_ext.common.errors import FairseqExtError, NoSpaceError, full_disk, note
from fairseq_ext.fairseq_changes.output_files import (
    describe,
    process_alive,
    read_record,
    release_lock,
    take_lock,
)

_PARTIAL = re.compile(r"\.partial-(\d+)$")
_NUMBERED = re.compile(r"checkpoint(\d+|_\d+_\d+)(-[\w-]+)?\.pt$")  # written before the copies
_SAVED = re.compile(r"checkpoint(\d+|_\d+_\d+|_best|_last)(-[\w-]+)?\.pt$")  # -suffix: shards
LOCK_NAME = "train.lock"
_HELD: dict[str, int] = {}  # the real path of each lock this process holds -> its descriptor


class SaveDirInUseError(FairseqExtError):
    """Another training writes the same ``--save-dir``."""


def remove_leftovers(folder: str, *, fairseq_tmp: bool = False) -> list[str]:
    """Remove (and return) ``folder``'s leftovers of killed saves (with ``fairseq_tmp``, also
    fairseq's ``*.pt.tmp`` files; a link is the user's)."""
    removed = []
    for path in sorted(glob.glob(os.path.join(glob.escape(folder), "*.partial-*"))):
        match = _PARTIAL.search(path)
        if match and not process_alive(int(match.group(1))):
            removed.append(path)
    if fairseq_tmp:
        tmp = glob.glob(os.path.join(glob.escape(folder), "*.pt.tmp"))
        removed += sorted(p for p in tmp if not os.path.islink(p))
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
    folder: str, exclude: tuple[str, ...] = (), pattern=_SAVED
) -> Optional[str]:
    """The newest complete checkpoint of ``folder`` named as fairseq-train names them."""
    found = [
        p
        for p in glob.glob(os.path.join(glob.escape(folder), "checkpoint*.pt"))
        if pattern.match(os.path.basename(p)) and os.path.basename(p) not in exclude
    ]
    newest_first = sorted(found, key=lambda p: (os.path.getmtime(p), p), reverse=True)
    return next((p for p in newest_first if is_complete(p)), None)


def no_space_error(final: str) -> NoSpaceError:
    """A full disk while saving ``final``, naming the last good checkpoint beside it."""
    folder = os.path.dirname(os.path.abspath(final))
    last = os.path.join(folder, "checkpoint_last.pt")
    if os.path.abspath(last) != os.path.abspath(final) and is_complete(last):
        good = last
    else:
        good = newest_complete_checkpoint(folder, exclude=(os.path.basename(final),))
    return NoSpaceError(
        f"no space left on the device while saving {final}; the last good checkpoint is "
        f"{good or 'none yet (nothing complete has been saved in this folder)'}. Free space (or "
        "keep fewer checkpoints: --keep-interval-updates N, --keep-last-epochs N, "
        "--no-epoch-checkpoints) and run the same command again to resume from it"
    )


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
    note(
        f"{why}: resuming from {os.path.basename(found)}, the newest complete checkpoint in "
        f"{save_dir}"
    )


def hold(save_dir: str) -> None:
    """Hold the lock of ``save_dir`` until this process exits, or stop with one line naming the
    training that holds it."""
    lock_path = os.path.realpath(os.path.join(save_dir, LOCK_NAME))
    here = ("", socket.gethostname())
    record = read_record(lock_path)
    if lock_path in _HELD or (  # a rank that fairseq spawned: its launcher holds it for the run
        record is not None and record.pid == str(os.getppid()) and record.host in here
    ):
        return

    def refused() -> SaveDirInUseError:
        return SaveDirInUseError(
            f"--save-dir {save_dir} is in use by another training: "
            f"{describe(read_record(lock_path))} holds {lock_path}; wait for it to end (or stop "
            "it), or give this run another --save-dir"
        )

    try:
        fd, previous = take_lock(lock_path, refused)
    except OSError as exc:
        if not full_disk(exc):
            raise
        raise NoSpaceError(
            f"no space left on the device of --save-dir {save_dir}, not even for its lock "
            f"{lock_path}; free space there (or give another --save-dir) and run again"
        ) from None
    _HELD[lock_path] = fd
    atexit.register(lambda: release_lock(lock_path, _HELD.pop(lock_path)))
    if previous is not None and int(previous.pid) != os.getpid():
        alive = previous.host not in here or process_alive(int(previous.pid))
        gone = "which no longer holds it" if alive else "which is no longer running (killed?)"
        note(f"took over {lock_path} from {describe(previous)}, {gone}")

"""Saving checkpoints so that a kill or a full disk loses no more than the interval since the
last complete one (applied by ``fairseq_changes.checkpoint_saving``)."""

from __future__ import annotations

import glob
import os
import re
import shutil
import zipfile
from typing import Optional

from fairseq_ext.common.errors import NoSpaceError, note
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

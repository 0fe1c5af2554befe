"""One training per ``--save-dir``: ``SAVE_DIR/train.lock`` held for the length of the run,
naming its pid, host and start time; a lock left by a killed run is taken over."""

from __future__ import annotations

import atexit
import os
import socket

from fairseq_ext.common.errors import FairseqExtError, NoSpaceError, full_disk, note
from fairseq_ext.fairseq_changes.output_files import (
    LockRecord,
    describe,
    process_alive,
    read_record,
    release_lock,
    take_lock,
)

LOCK_NAME = "train.lock"
_HELD: dict[str, int] = {}  # the real path of each lock this process holds -> its descriptor


class SaveDirInUseError(FairseqExtError):
    """Another training writes the same ``--save-dir``."""


def _gone(record: LockRecord) -> str:
    if record.host in ("", socket.gethostname()) and not process_alive(int(record.pid)):
        return "which is no longer running (killed?)"
    return "which no longer holds it"


def hold(save_dir: str) -> None:
    """Hold the lock of ``save_dir`` until this process exits, or stop with one line naming the
    training that holds it."""
    lock_path = os.path.realpath(os.path.join(save_dir, LOCK_NAME))
    if lock_path in _HELD:
        return
    if os.path.exists(
        lock_path
    ):  # a rank that fairseq spawned: the launching process holds it for the run
        record = read_record(lock_path)
        if (
            record is not None
            and str(record.pid) == str(os.getppid())
            and record.host in ("", socket.gethostname())
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
    atexit.register(_release, lock_path)
    if previous is not None and int(previous.pid) != os.getpid():
        note(f"took over {lock_path} from {describe(previous)}, {_gone(previous)}")


def _release(lock_path: str) -> None:
    fd = _HELD.pop(lock_path, None)
    if fd is not None:
        release_lock(lock_path, fd)

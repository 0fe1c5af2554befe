"""Output files never half-written and never shared by two runs: ``exclusive_output`` writes
under a lock (``PATH.lock``: PID, host, start time) to ``PATH.partial-<pid>`` and moves it into
place when the writer ends without an error; ``take_lock`` is the lock alone. fairseq-generate's
results file is written so (``generating_exclusively``, row ``checked-paths-generate``)."""

from __future__ import annotations

import fcntl
import glob
import os
import shutil
import socket
import time
from typing import IO, Callable, NamedTuple, Optional

from fairseq_ext.common.errors import FairseqExtError, NoSpaceError, full_disk, note


class OutputInUseError(FairseqExtError):
    """Another process is writing the same output file."""


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host is running (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


class LockRecord(NamedTuple):
    """A lock file's line: ``pid``, ``host`` and ``started`` (UTC; the last two may be empty)."""

    pid: str
    host: str
    started: str


def read_record(lock_path: str) -> Optional[LockRecord]:
    """The record of ``lock_path``; None when the file is gone or holds no pid yet."""
    try:
        with open(lock_path, encoding="utf-8") as f:
            fields = f.read().strip().split(maxsplit=2)
    except OSError:
        return None
    if not fields or not fields[0].isdigit():
        return None
    return LockRecord(*fields, *[""] * (3 - len(fields)))


def describe(record: Optional[LockRecord]) -> str:
    """``process PID (COMMAND) on HOST, started TIME``, as far as the record and ``/proc`` say."""
    if record is None:  # gone, or the holder has the lock but has not written its pid yet
        return "another process"
    command = ""
    if record.host in ("", socket.gethostname()):
        try:
            with open(f"/proc/{record.pid}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            pass
    where = f" on {record.host}" if record.host else ""
    started = f", started {record.started}" if record.started else ""
    return f"process {record.pid}" + (f" ({command[:120]})" if command else "") + where + started


def _holder(lock_path: str) -> str:
    return describe(read_record(lock_path))


def take_lock(lock_path: str, refused: Callable[[], Exception]) -> tuple[int, Optional[LockRecord]]:
    """An exclusive ``flock`` on ``lock_path`` (created if missing; released by the kernel when
    its holder ends, however it ends) with this process's record written in it; ``refused()`` is
    raised while another process holds it. Returns the descriptor and the record found before
    ours (a holder killed before it removed the file), or None."""
    while True:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise refused() from None
        try:
            same = os.fstat(fd).st_ino == os.stat(lock_path).st_ino
        except FileNotFoundError:  # the previous holder removed it after we opened it
            same = False
        if not same:
            os.close(fd)
            continue
        try:
            previous = read_record(lock_path)
            os.ftruncate(fd, 0)
            started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
            os.write(fd, f"{os.getpid()} {socket.gethostname()} {started}\n".encode())
        except BaseException:  # a full disk: the caller says so
            os.close(fd)
            raise
        return fd, previous


def release_lock(lock_path: str, fd: int) -> None:
    """Remove ``lock_path`` and let go of the lock ``take_lock`` gave as ``fd``."""
    _remove(lock_path)
    os.close(fd)


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
        return
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


class _ExclusiveTarget:
    """The lock of ``path`` and the name its text is written under until complete
    (``PATH.partial-<pid>``, a file or a folder); ``finish`` moves the text into place, or removes
    it and says why."""

    def __init__(self, path, option: str):
        self.path, self.option = os.fspath(path), option
        self.lock_path = self.path + ".lock"
        self.partial = f"{self.path}.partial-{os.getpid()}"

        def refused() -> OutputInUseError:
            return OutputInUseError(
                f"{self.path} is being written by {_holder(self.lock_path)}; wait for it to end "
                f"or give another {option}"
            )

        try:
            self._lock_fd = take_lock(self.lock_path, refused)[0]
        except OSError as exc:
            if full_disk(exc):
                _remove(self.lock_path)
                raise self._no_space() from None
            raise
        try:
            for leftover in glob.glob(glob.escape(self.path) + ".partial-*"):
                _remove(leftover)  # we hold the lock: whoever wrote it is gone
        except BaseException:
            release_lock(self.lock_path, self._lock_fd)
            raise

    def _no_space(self) -> NoSpaceError:
        exists = os.path.exists(self.path)
        kept = f"the earlier complete {self.path} is kept" if exists else "nothing was kept"
        return NoSpaceError(
            f"no space left on the device while writing {self.path}; {kept}. Free space there "
            f"(or give another {self.option}) and run the same command again"
        )

    def finish(
        self, written: str, failure: Optional[BaseException], raised: Optional[BaseException]
    ) -> None:
        """Without ``failure``, move ``written`` (the complete text) to ``path``; else remove the
        partial text and raise a full disk as one line, or ``failure`` where it is not ``raised``
        (the exception already under way). The lock is released either way."""
        try:
            if failure is None:
                if os.path.exists(self.path):
                    note(f"replaced the earlier {self.path}")
                os.replace(written, self.path)
                _remove(self.partial)  # the folder ``written`` was in, if any
                return
            _remove(self.partial)
            if full_disk(failure):
                raise self._no_space() from None
            if failure is not raised:
                raise failure
        finally:
            release_lock(self.lock_path, self._lock_fd)


class exclusive_output(_ExclusiveTarget):  # noqa: N801  (used like open())
    """``with exclusive_output(path, "w", encoding="utf-8") as f: ...``: ``path`` appears,
    complete, when the block ends without an error; nobody else writes it meanwhile."""

    def __init__(self, path, mode: str = "w", *args, option: str = "the output path", **kwargs):
        super().__init__(path, option)
        try:
            self.file: IO = open(self.partial, mode, *args, **kwargs)
        except BaseException:
            release_lock(self.lock_path, self._lock_fd)
            raise

    def __enter__(self) -> IO:
        return self.file

    def __exit__(self, exc_type, exc, tb) -> None:
        failure = exc
        try:
            self.file.close()
        except OSError as error:  # the last buffered write
            failure = failure or error
        self.finish(self.partial, failure, exc)


def generating_exclusively(main, cfg):
    """``fairseq_cli.generate.main(cfg)`` whose ``--results-path`` file (``generate-SUBSET.txt``)
    is written as ``exclusive_output`` writes: fairseq-generate opens the file itself, so its
    ``--results-path`` is, for the run, a folder of its own (``FILE.partial-<pid>``)."""
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from omegaconf import DictConfig

    if not isinstance(cfg, DictConfig):  # what fairseq-generate's main does first
        cfg = convert_namespace_to_omegaconf(cfg)
    folder = cfg.common_eval.results_path
    if folder is None:
        return main(cfg)
    name = f"generate-{cfg.dataset.gen_subset}.txt"
    os.makedirs(folder, exist_ok=True)  # as fairseq-generate does; the lock lives in it
    target = _ExclusiveTarget(os.path.join(folder, name), "--results-path")
    cfg.common_eval.results_path = target.partial
    try:
        result = main(cfg)
    except BaseException as exc:
        target.finish(target.partial, exc, exc)
        raise
    finally:
        cfg.common_eval.results_path = folder
    target.finish(os.path.join(target.partial, name), None, None)
    return result

"""User-facing errors: one message that names the problem and the fix, no deep stack trace."""

from __future__ import annotations

import errno
import os
import signal
import sys
from types import TracebackType

from fairseq_ext.fairseq_changes import patch_scope


class FairseqExtError(ValueError):
    """A problem with the user's input (options, data, checkpoint). The message says what is
    wrong and how to fix it; command-line tools print it without a traceback."""


class NoSpaceError(FairseqExtError):
    """The device being written is full."""


def full_disk(exc: BaseException | None) -> bool:
    """Whether ``exc`` or an exception it was raised from is a full disk (torch raises a
    RuntimeError, ``unexpected pos``, while closing its archive after the OSError)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, NoSpaceError) or (
            isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)
        ):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def require(condition: bool, message: str) -> None:
    """Raise ``FairseqExtError(message)`` unless ``condition`` holds."""
    if not condition:
        raise FairseqExtError(message)


def note(message: str) -> None:
    """One line on stderr about input the plugin answered and skipped; the run goes on."""
    sys.stderr.write(f"fairseq_ext: {message}\n")


def in_chain(exc: BaseException | None, kind: type[BaseException]) -> BaseException | None:
    """The exception of type ``kind`` behind ``exc`` (``exc`` itself included), if any."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, kind):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def user_error_in_chain(exc: BaseException | None) -> FairseqExtError | None:
    """The ``FairseqExtError`` behind ``exc``, if any: fairseq sometimes re-raises a generic
    exception from inside an ``except`` block (e.g. "Cannot load model parameters ..."), which
    keeps ours as the context."""
    return in_chain(exc, FairseqExtError)


def end_by_sigint() -> None:
    """End this process by SIGINT (status 130 in the shell), its output flushed, as Python ends
    one that a ``KeyboardInterrupt`` ended."""
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)


def one_line_excepthook(previous):
    """``sys.excepthook`` that prints a ``FairseqExtError`` (also behind another exception) as one
    line on stderr (the process still exits with 1), prints nothing for Ctrl-C
    (``KeyboardInterrupt``, also behind an exception raised while it unwound, such as a
    DataLoader's ``RuntimeError`` for a worker the same Ctrl-C ended) in a command of the
    plugin (``patch_scope.serves`` of the task of the command it ended, ``patch_scope.task_of``;
    the process then ends by SIGINT, which the shell shows as status 130, so that a script
    running it stops too: Python does so for a ``KeyboardInterrupt``, ``end_by_sigint`` for one
    behind another exception), and hands every other exception to ``previous``."""
    if getattr(previous, "prints_user_errors", False):
        return previous

    def excepthook(
        exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
    ) -> None:
        user_error = user_error_in_chain(exc)
        if user_error is not None:
            sys.stderr.write(f"fairseq_ext: error: {user_error}\n")
            return
        interrupted = in_chain(exc, KeyboardInterrupt) is not None
        if interrupted and patch_scope.serves(patch_scope.task_of(exc)):
            if not isinstance(exc, KeyboardInterrupt):
                end_by_sigint()
            return
        previous(exc_type, exc, tb)

    excepthook.prints_user_errors = True
    return excepthook


def install_cli_excepthook() -> None:
    """For the plugin's own commands: ``one_line_excepthook`` in place (once)."""
    sys.excepthook = one_line_excepthook(sys.excepthook)

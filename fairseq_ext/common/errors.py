"""User-facing errors: one message that names the problem and the fix, no deep stack trace."""

from __future__ import annotations

import errno
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


def user_error_in_chain(exc: BaseException | None) -> FairseqExtError | None:
    """The ``FairseqExtError`` behind ``exc``, if any: fairseq sometimes re-raises a generic
    exception from inside an ``except`` block (e.g. "Cannot load model parameters ..."), which
    keeps ours as the context."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, FairseqExtError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def one_line_excepthook(previous):
    """``sys.excepthook`` that prints a ``FairseqExtError`` (also behind another exception) as one
    line on stderr (the process still exits with 1), prints nothing for Ctrl-C
    (``KeyboardInterrupt``) in a command of the plugin (``patch_scope.serves`` of the task of the
    command it ended, ``patch_scope.task_of``; Python then ends the process by SIGINT, which the
    shell shows as status 130, so that a script running it stops too), and hands every other
    exception to ``previous``."""
    if getattr(previous, "prints_user_errors", False):
        return previous

    def excepthook(
        exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
    ) -> None:
        user_error = user_error_in_chain(exc)
        if user_error is not None:
            sys.stderr.write(f"fairseq_ext: error: {user_error}\n")
            return
        if issubclass(exc_type, KeyboardInterrupt) and patch_scope.serves(patch_scope.task_of(exc)):
            return
        previous(exc_type, exc, tb)

    excepthook.prints_user_errors = True
    return excepthook


def install_cli_excepthook() -> None:
    """For the plugin's own commands: ``one_line_excepthook`` in place (once)."""
    sys.excepthook = one_line_excepthook(sys.excepthook)

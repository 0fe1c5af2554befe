"""The ``one-line-errors`` row: ``sys.excepthook`` prints the plugin's input errors as one line."""

from __future__ import annotations

import os
import signal
import sys
from types import TracebackType

from fairseq_ext.common.errors import in_chain, user_error_in_chain
from fairseq_ext.fairseq_changes import patch_scope


def one_line_excepthook(previous):
    """``sys.excepthook``: a ``FairseqExtError`` (also behind another exception) as one line (exit
    status 1), nothing for Ctrl-C in a command the change serves, also behind an exception raised
    while it unwound (a DataLoader's ``RuntimeError``): the process ends by SIGINT, status 130;
    every other exception to ``previous``."""
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


def end_by_sigint() -> None:
    """End this process by SIGINT (status 130), as Python ends one a ``KeyboardInterrupt`` ended."""
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)


def install_cli_excepthook() -> None:
    """For the plugin's own commands: ``one_line_excepthook`` in place (once)."""
    sys.excepthook = one_line_excepthook(sys.excepthook)

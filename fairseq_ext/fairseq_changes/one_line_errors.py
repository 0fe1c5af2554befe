"""The ``one-line-errors`` row: ``sys.excepthook`` prints the plugin's input errors as one line."""

from __future__ import annotations

import sys
from types import TracebackType

from fairseq_ext.common.errors import user_error_in_chain
from fairseq_ext.fairseq_changes import patch_scope


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

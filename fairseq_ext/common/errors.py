"""User-facing errors: one message naming the problem and the fix (printed as one line by
``fairseq_changes.one_line_errors``)."""

from __future__ import annotations

import errno
import sys


class FairseqExtError(ValueError):
    """A problem with the user's input (options, data, checkpoint); tools print it without a
    traceback."""


class NoSpaceError(FairseqExtError):
    """The device being written is full."""


def _chain(exc: BaseException | None):
    """``exc`` and the exceptions it was raised from or during, each once."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        yield exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__


def full_disk(exc: BaseException | None) -> bool:
    """Whether ``exc`` or one behind it is a full disk (torch raises a RuntimeError, ``unexpected
    pos``, while closing its archive after the OSError)."""
    return any(
        isinstance(e, NoSpaceError)
        or (isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT))
        for e in _chain(exc)
    )


def require(condition: bool, message: str) -> None:
    """Raise ``FairseqExtError(message)`` unless ``condition`` holds."""
    if not condition:
        raise FairseqExtError(message)


def note(message: str) -> None:
    """One line on stderr about input the plugin answered and skipped; the run goes on."""
    sys.stderr.write(f"fairseq_ext: {message}\n")


def in_chain(exc: BaseException | None, kind: type[BaseException]) -> BaseException | None:
    """The exception of type ``kind`` behind ``exc`` (``exc`` itself included), if any."""
    return next((e for e in _chain(exc) if isinstance(e, kind)), None)


def user_error_in_chain(exc: BaseException | None) -> FairseqExtError | None:
    """The ``FairseqExtError`` behind ``exc`` (fairseq re-raises some errors from an ``except``
    block, which keeps ours as the context), or None."""
    return in_chain(exc, FairseqExtError)

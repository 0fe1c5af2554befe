"""Checks of one path a user gave, each a ``FairseqExtError`` naming the path, what is wrong and the
fix: missing, of the other kind, unreadable, a folder that cannot be written (probed with an empty
file), a dictionary cut short. Nothing written here stays."""

from __future__ import annotations

import os
import tempfile

from fairseq_ext.common.errors import FairseqExtError


def _require_readable(path: str, label: str, fix: str, folder: bool) -> None:
    if not os.path.exists(path):
        if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            where = os.path.dirname(path) or "."
            raise FairseqExtError(
                f"{label} {path} does not exist (nor does its folder {where}); {fix}"
            )
        raise FairseqExtError(f"{label} {path} does not exist; {fix}")
    if os.path.isdir(path) != folder:
        kind = "a folder, not a file" if os.path.isdir(path) else "a file, not a folder"
        raise FairseqExtError(f"{label} {path} is {kind}; {fix}")
    try:
        if folder:
            os.listdir(path)
        else:
            open(path, "rb").close()
    except OSError as exc:
        raise FairseqExtError(
            f"{label} {path} cannot be read: {exc.strerror}; make it readable (chmod a+r), or {fix}"
        ) from None


def require_readable_file(path: str, label: str, fix: str) -> None:
    """``path`` is a file this process can open for reading."""
    _require_readable(path, label, fix, folder=False)


def require_readable_folder(path: str, label: str, fix: str) -> None:
    """``path`` is a folder whose entries this process can list."""
    _require_readable(path, label, fix, folder=True)


def _nearest_existing(path: str) -> str:
    here = os.path.abspath(path)
    while not os.path.lexists(here):
        here = os.path.dirname(here)
    return here


def require_writable_folder(path: str, option: str, what: str) -> None:
    """``path`` is a folder (or one that can be made) that this process can create ``what``
    (e.g. ``checkpoints``) in: the folder itself, or its nearest existing parent, takes an empty
    probe file, removed at once."""
    existing = _nearest_existing(path)
    if not os.path.isdir(existing):
        what_is_wrong = (
            "is a file, not a folder"
            if existing == os.path.abspath(path)
            else f"cannot be made: {existing} is a file, not a folder"
        )
        raise FairseqExtError(
            f"{option} {path} {what_is_wrong}; give {option} a folder (new or existing) for the "
            f"{what}"
        )
    try:
        descriptor, probe = tempfile.mkstemp(
            prefix="write-test.", suffix=f".partial-{os.getpid()}", dir=existing
        )
        os.close(descriptor)
    except OSError as exc:
        raise FairseqExtError(
            f"cannot write {what} to {option} {path}: {exc.strerror}. Give a {option} on a "
            "writable filesystem that you may create files in (or make this one writable), and "
            "run again"
        ) from None
    os.remove(probe)


def refuse_cut_dictionary(path: str) -> None:
    """A dictionary ``fairseq-preprocess`` writes (``dict.*.txt``: ``<token> <count>`` lines) ends
    with a newline; one that does not was cut while it was written (fairseq would stop at its
    last line with "Incorrect dictionary format", or read a cut count)."""
    require_readable_file(path, "dictionary", "give the data folder fairseq-preprocess wrote")
    with open(path, "rb") as f:
        data = f.read()
    if not data or data.endswith(b"\n"):
        return
    last = data[data.rfind(b"\n") + 1 :].decode("utf-8", "replace")
    count = " (no count)" if len(last.split()) < 2 else ""
    line = data.count(b"\n") + 1
    raise FairseqExtError(
        f"dictionary {path} is cut short: its last line, line {line} {last[:40]!r}{count}, ends "
        "without a newline, as when fairseq-preprocess runs out of disk space while writing it. "
        "Check the free disk space (df -h), then run fairseq-preprocess again into an empty "
        "--destdir"
    )

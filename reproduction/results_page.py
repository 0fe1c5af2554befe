"""The generated block of a results page: what stands between a ``<!-- NAME:start -->`` and a
``<!-- NAME:end -->`` line, rewritten by the script that measured it (collectors, ``make bench``,
``make gpu-rehearsal``)."""

from __future__ import annotations

from pathlib import Path

from fairseq_ext.common.errors import require


def write_between_markers(page: Path, block: str, start: str, end: str) -> None:
    """Replace what stands between ``start`` and ``end`` on ``page`` with ``block`` (which ends
    with a newline); the rest of the page stays as it is."""
    text = Path(page).read_text(encoding="utf-8")
    require(
        text.count(start) == 1 and text.count(end) == 1 and text.index(start) < text.index(end),
        f"{page} needs one {start} line before one {end} line around its generated block",
    )
    head, rest = text.split(start, 1)
    Path(page).write_text(f"{head}{start}\n{block}{end}{rest.split(end, 1)[1]}", encoding="utf-8")

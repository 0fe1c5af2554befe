"""The complete checkpoints of a run stopped part-way. With ``--save-interval-updates`` fairseq
writes ``checkpoint_EPOCH_UPDATES.pt`` and then copies it to ``checkpoint_last.pt``; a process
killed while writing either leaves a file without the zip directory that torch.save writes
last (passed over here), and one killed between the two leaves ``checkpoint_last.pt`` older
than the newest checkpoint. The plugin's own tasks get this from ``fairseq_ext.checkpoints``
inside fairseq-train; the drivers need it before they start one (to know where a run stands),
and for fairseq's own tasks."""
from __future__ import annotations

import re
import shutil
import zipfile
from pathlib import Path

INTERVAL = re.compile(r"checkpoint_\d+_(\d+)\.pt")


def interval_update(path: Path) -> int:
    """The update count in an interval checkpoint's name."""
    return int(INTERVAL.fullmatch(path.name).group(1))


def latest_interval_checkpoint(save_dir: Path) -> Path | None:
    """The newest complete ``checkpoint_EPOCH_UPDATES.pt`` in ``save_dir``, or None."""
    kept = [p for p in save_dir.glob("checkpoint_*_*.pt") if INTERVAL.fullmatch(p.name) and zipfile.is_zipfile(p)]
    return max(kept, key=interval_update, default=None)


def mend_last_checkpoint(save_dir: Path) -> None:
    """Makes ``checkpoint_last.pt`` the newest complete checkpoint: the newest complete interval
    checkpoint takes its place where it is missing, cut short, or older (a process killed between
    writing that checkpoint and copying it); one cut short with nothing to take its place is
    removed (fairseq then starts the run again from its start)."""
    last = save_dir / "checkpoint_last.pt"
    whole = last.is_file() and zipfile.is_zipfile(last)
    newest = latest_interval_checkpoint(save_dir)
    if newest is not None and (not whole or newest.stat().st_mtime_ns > last.stat().st_mtime_ns):
        tmp = save_dir / "checkpoint_last.pt.tmp"
        shutil.copy2(newest, tmp)
        tmp.replace(last)
    elif last.is_file() and not whole:
        last.unlink()

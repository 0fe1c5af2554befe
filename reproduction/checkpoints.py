"""The complete checkpoints of a run stopped part-way. With ``--save-interval-updates`` fairseq
writes ``checkpoint_EPOCH_UPDATES.pt`` and then copies it to ``checkpoint_last.pt``; a process
killed while writing either leaves a file without the zip directory that torch.save writes
last, which these functions pass over."""
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
    """A ``checkpoint_last.pt`` cut short is replaced by the newest complete interval checkpoint,
    or removed where there is none (fairseq then starts the run again from its start)."""
    last = save_dir / "checkpoint_last.pt"
    if not last.is_file() or zipfile.is_zipfile(last):
        return
    newest = latest_interval_checkpoint(save_dir)
    if newest is None:
        last.unlink()
        return
    tmp = save_dir / "checkpoint_last.pt.tmp"
    shutil.copyfile(newest, tmp)
    tmp.replace(last)

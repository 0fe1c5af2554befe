"""reproduction/checkpoints.py: which checkpoint a run stopped part-way continues from, on files
written by torch.save and cut short as a killed process leaves them."""
import os

import torch

from reproduction.checkpoints import latest_interval_checkpoint, mend_last_checkpoint


def save(path, step):
    torch.save({"step": step}, path)
    return path.read_bytes()


def test_the_newest_complete_interval_checkpoint_is_the_one_to_continue_from(tmp_path):
    assert latest_interval_checkpoint(tmp_path) is None
    for name in ("checkpoint_1_350.pt", "checkpoint_1_700.pt", "checkpoint_last.pt"):
        save(tmp_path / name, name)
    assert latest_interval_checkpoint(tmp_path).name == "checkpoint_1_700.pt"
    whole = (tmp_path / "checkpoint_1_700.pt").read_bytes()
    (tmp_path / "checkpoint_2_1050.pt").write_bytes(whole[: len(whole) // 2])  # a write cut short by a kill
    assert latest_interval_checkpoint(tmp_path).name == "checkpoint_1_700.pt"


def test_the_last_checkpoint_becomes_the_newest_complete_one(tmp_path):
    last = tmp_path / "checkpoint_last.pt"
    whole = save(last, 700)
    mend_last_checkpoint(tmp_path)  # complete, and no interval checkpoint: left as it is
    assert last.read_bytes() == whole
    interval = save(tmp_path / "checkpoint_1_700.pt", 700)
    os.utime(last, ns=(1, 1))  # older than the interval checkpoint: killed before the copy
    mend_last_checkpoint(tmp_path)
    assert last.read_bytes() == interval and last.stat().st_mtime_ns == (tmp_path / "checkpoint_1_700.pt").stat().st_mtime_ns
    newer = save(last, 800)  # the copy of a later one: newer than the interval checkpoint, left alone
    mend_last_checkpoint(tmp_path)
    assert last.read_bytes() == newer
    last.write_bytes(whole[:100])  # cut short
    mend_last_checkpoint(tmp_path)
    assert last.read_bytes() == interval
    last.unlink()  # missing
    mend_last_checkpoint(tmp_path)
    assert last.read_bytes() == interval
    (tmp_path / "checkpoint_1_700.pt").unlink()
    last.write_bytes(whole[:100])  # cut short, nothing to take its place
    mend_last_checkpoint(tmp_path)
    assert not last.exists()
    mend_last_checkpoint(tmp_path)  # nothing there: nothing to do
    assert list(tmp_path.iterdir()) == []

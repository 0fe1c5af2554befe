"""reproduction/checkpoints.py: which checkpoint a run stopped part-way continues from, on files
written by torch.save and cut short as a killed process leaves them."""
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


def test_a_last_checkpoint_cut_short_is_replaced_by_the_newest_complete_one_or_removed(tmp_path):
    whole = save(tmp_path / "checkpoint_last.pt", 700)
    mend_last_checkpoint(tmp_path)  # complete: left as it is
    assert (tmp_path / "checkpoint_last.pt").read_bytes() == whole
    interval = save(tmp_path / "checkpoint_1_700.pt", 700)
    (tmp_path / "checkpoint_last.pt").write_bytes(whole[:100])
    mend_last_checkpoint(tmp_path)
    assert (tmp_path / "checkpoint_last.pt").read_bytes() == interval
    (tmp_path / "checkpoint_1_700.pt").unlink()
    (tmp_path / "checkpoint_last.pt").write_bytes(whole[:100])
    mend_last_checkpoint(tmp_path)
    assert not (tmp_path / "checkpoint_last.pt").exists()
    mend_last_checkpoint(tmp_path)  # nothing there: nothing to do

"""Checkpoint saving through real fairseq-train processes: leftovers of killed saves
(``*.partial-<pid>``, fairseq's ``*.pt.tmp``) are removed at start-up and at the next copy; a
run whose ``checkpoint_last.pt`` is missing, or older than a complete checkpoint, resumes from
the newest complete checkpoint and says so; a full disk (a small tmpfs that fills up midway through
a save; writes to ``/dev/full``, which fail with the kernel's ENOSPC at once) is one line naming the
last good checkpoint, with nothing partial left behind; a --save-dir that cannot be written (a
read-only mount, a folder without write permission) is one line before the first update."""

import os
import re
import shutil
import subprocess
import sys

import pytest
import torch
from fairseq import checkpoint_utils
from fairseq.file_io import PathManager

from fairseq_ext.common.errors import NoSpaceError
from tests.conftest import run, train_args
from tests.helpers.filesystems import as_unprivileged, tmpfs

FULL = "/dev/full"
needs_dev_full = pytest.mark.skipif(not os.path.exists(FULL), reason="no /dev/full on this system")


def _updates(path):
    return torch.load(path, map_location="cpu", weights_only=True)["optimizer_history"][-1][
        "num_updates"
    ]


def _dead_pid() -> int:
    """The PID of a process that has ended."""
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    return int(proc.stdout)


def _save_args(data, save, updates):
    return train_args(
        data,
        save,
        "--save-interval-updates",
        "2",
        "--no-epoch-checkpoints",
        "--disable-validation",
        updates=updates,
    )


def test_lost_checkpoint_last_resumes_from_the_newest_complete_one(tiny_data, tmp_path):
    """The state a kill during the very first copy leaves: checkpoint_1_2.pt complete,
    checkpoint_last.pt absent, half of it in checkpoint_last.pt.partial-<pid>. fairseq would
    start again from update 0."""
    save = tmp_path / "save"
    run(_save_args(tiny_data, save, 2))
    complete = save / "checkpoint_1_2.pt"
    (save / "checkpoint_last.pt").unlink()
    partial = save / f"checkpoint_last.pt.partial-{_dead_pid()}"
    partial.write_bytes(complete.read_bytes()[: complete.stat().st_size // 2])
    (save / "checkpoint_1_4.pt.tmp").write_bytes(b"half a save")
    resumed = run(_save_args(tiny_data, save, 4))
    log = resumed.stdout + resumed.stderr
    assert f"fairseq_ext: removed {partial}, left by a save that was interrupted" in log
    assert (
        f"fairseq_ext: {save / 'checkpoint_last.pt'} is missing (a run killed while writing it?): "
        f"resuming from checkpoint_1_2.pt, the newest complete checkpoint in {save}"
    ) in log
    assert re.search(r"Loaded checkpoint .*checkpoint_last\.pt \(epoch 1 @ 2 updates\)", log)
    assert sorted(os.listdir(save)) == [
        "checkpoint_1_2.pt",
        "checkpoint_1_4.pt",
        "checkpoint_last.pt",
    ]
    assert _updates(save / "checkpoint_last.pt") == 4 and _updates(complete) == 2


def test_older_checkpoint_last_gives_way_to_the_newest_complete_one(tiny_data, tmp_path):
    """The state a kill between writing checkpoint_1_4.pt and copying it leaves: checkpoint_last.pt
    is still the copy of checkpoint_1_2.pt (older). fairseq resumed from update 2."""
    save = tmp_path / "save"
    run(_save_args(tiny_data, save, 4))
    newest = (save / "checkpoint_1_4.pt").stat().st_mtime
    shutil.copyfile(save / "checkpoint_1_2.pt", save / "checkpoint_last.pt")
    os.utime(save / "checkpoint_last.pt", (newest - 60, newest - 60))
    resumed = run(_save_args(tiny_data, save, 6))
    log = resumed.stdout + resumed.stderr
    assert (
        f"fairseq_ext: {save / 'checkpoint_last.pt'} is older than checkpoint_1_4.pt (a run killed "
        "before copying it?): resuming from checkpoint_1_4.pt, the newest complete checkpoint in "
        f"{save}"
    ) in log
    assert re.search(r"Loaded checkpoint .*checkpoint_last\.pt \(epoch 1 @ 4 updates\)", log)
    assert _updates(save / "checkpoint_last.pt") == 6 and _updates(save / "checkpoint_1_4.pt") == 4


def test_next_copy_removes_partials_of_ended_processes_only(tmp_path):
    src, dst = tmp_path / "checkpoint_1_2.pt", tmp_path / "checkpoint_last.pt"
    torch.save({"step": 2}, src)
    dead = tmp_path / f"checkpoint_last.pt.partial-{_dead_pid()}"
    dead.write_bytes(b"half")
    alive = (
        tmp_path / f"checkpoint_best.pt.partial-{os.getppid()}"
    )  # a running process: maybe still copying
    alive.write_bytes(b"half")
    assert PathManager.copy(str(src), str(dst), overwrite=True)
    assert sorted(os.listdir(tmp_path)) == sorted([src.name, dst.name, alive.name])


@needs_dev_full
def test_full_disk_while_saving_names_the_last_good_checkpoint(tiny_data, tmp_path):
    """The save at update 4 writes checkpoint_1_4.pt.tmp, linked to /dev/full."""
    save = tmp_path / "save"
    save.mkdir()
    os.symlink(FULL, save / "checkpoint_1_4.pt.tmp")
    proc = run(_save_args(tiny_data, save, 4), check=False)
    assert proc.returncode != 0
    assert (
        "fairseq_ext: error: no space left on the device while saving "
        f"{save / 'checkpoint_1_4.pt'}; the last good checkpoint is {save / 'checkpoint_last.pt'}. "
        "Free space"
    ) in proc.stderr
    assert "Traceback" not in proc.stderr
    assert sorted(os.listdir(save)) == ["checkpoint_1_2.pt", "checkpoint_last.pt"]
    assert _updates(save / "checkpoint_last.pt") == 2


@needs_dev_full
def test_full_disk_in_process_for_the_save_and_the_copy(tmp_path):
    last = tmp_path / "checkpoint_last.pt"
    torch.save({"step": 2}, last)
    os.symlink(FULL, tmp_path / "checkpoint_1_4.pt.tmp")
    with pytest.raises(
        NoSpaceError,
        match=f"saving {tmp_path / 'checkpoint_1_4.pt'}; the last good checkpoint is {last}",
    ):
        checkpoint_utils.torch_persistent_save(
            {"w": torch.ones(1000)}, str(tmp_path / "checkpoint_1_4.pt")
        )
    shutil.copyfile(last, tmp_path / "checkpoint_1_2.pt")
    os.symlink(FULL, tmp_path / f"checkpoint_best.pt.partial-{os.getpid()}")
    with pytest.raises(
        NoSpaceError,
        match=f"saving {tmp_path / 'checkpoint_best.pt'}; the last good checkpoint is {last}",
    ):
        PathManager.copy(
            str(tmp_path / "checkpoint_1_2.pt"),
            str(tmp_path / "checkpoint_best.pt"),
            overwrite=True,
        )
    assert sorted(os.listdir(tmp_path)) == ["checkpoint_1_2.pt", "checkpoint_last.pt"]


def _fill(folder, leave_kib):
    """Fill the filesystem of ``folder`` up to ``leave_kib`` KiB free."""
    free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
    (folder / "filler").write_bytes(b"\0" * (free - leave_kib * 1024))


def test_filesystem_that_fills_up_during_a_save_names_the_last_good_checkpoint(tiny_data, tmp_path):
    """A real full disk: a 4 MiB tmpfs filled to 64 KiB free after update 2, so that torch's zip
    writer runs out of blocks midway through checkpoint_1_4.pt (its error is a RuntimeError,
    ``unexpected pos``, raised from the ENOSPC)."""
    with tmpfs(tmp_path / "disk", 4096) as disk:
        save = disk / "save"
        run(_save_args(tiny_data, save, 2))
        _fill(disk, 64)
        proc = run(_save_args(tiny_data, save, 4), check=False)
        assert proc.returncode != 0
        assert (
            "fairseq_ext: error: no space left on the device while saving "
            f"{save / 'checkpoint_1_4.pt'}; the last good checkpoint is "
            f"{save / 'checkpoint_last.pt'}. Free space"
        ) in proc.stderr
        assert "Traceback" not in proc.stderr and "enforce fail" not in proc.stderr
        assert sorted(os.listdir(save)) == ["checkpoint_1_2.pt", "checkpoint_last.pt"]
        assert _updates(save / "checkpoint_last.pt") == 2


def _refused_save_dir(proc, save, reason):
    assert proc.returncode != 0
    assert proc.stderr.splitlines()[-1] == (
        f"fairseq_ext: error: cannot write checkpoints to --save-dir {save}: {reason}. Give a "
        "--save-dir on a writable filesystem that you may create files in (or make this one "
        "writable), and run again"
    )
    assert "Traceback" not in proc.stderr and "Unable to access" not in proc.stderr + proc.stdout


def test_read_only_save_dir_is_one_line_before_training(tiny_data, tmp_path):
    """A read-only mount, as the save dir itself and as the parent of one to create."""
    with tmpfs(tmp_path / "ro", 1024, read_only=True) as ro:
        for save in (ro, ro / "save"):
            _refused_save_dir(
                run(_save_args(tiny_data, save, 2), check=False), save, "Read-only file system"
            )
        assert os.listdir(ro) == []


def test_save_dir_the_user_cannot_write_is_one_line(tiny_data, tmp_path):
    """A folder without write permission, for a user who is not root (as root: without root's
    override)."""
    save = tmp_path / "locked"
    save.mkdir(mode=0o555)
    proc = run(as_unprivileged(_save_args(tiny_data, save, 2)), check=False)
    _refused_save_dir(proc, save, "Permission denied")
    assert os.listdir(save) == []

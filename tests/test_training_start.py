"""What a real ``fairseq-train`` does when it starts on a ``--save-dir``: a second training on a
folder that a running one holds stops at once with one line naming the holder, and the first
run's checkpoints stay as it writes them; the lock that a killed run leaves is taken over and
named; a resume from a checkpoint that has spent ``--max-update`` or ``--max-epoch`` trains
nothing, leaves every file byte for byte as it was, and says so."""

import hashlib
import os
import re
import signal
import socket
import subprocess
import time

import torch

from tests.conftest import cli_env, run, train_args

DEADLINE_S = 300


def _hashes(folder):
    return {
        name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
        for name in sorted(os.listdir(folder))
    }


def _state(path):
    state = torch.load(path, map_location="cpu", weights_only=False)
    return state["optimizer_history"][-1]["num_updates"], state["cfg"]["common"]["seed"]


def _start(args):
    return subprocess.Popen(
        [str(a) for a in args],
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_until(condition, proc, what):
    deadline = time.time() + DEADLINE_S
    while not condition():
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.time() < deadline, f"the run never {what}"
        time.sleep(0.02)


def _holds_lock(lock, proc):
    return lambda: lock.exists() and lock.read_text().split()[:1] == [str(proc.pid)]


def _run_args(data, save, seed, updates):
    return train_args(
        data,
        save,
        "--seed",
        str(seed),
        "--max-tokens",
        "300",
        "--save-interval-updates",
        "2",
        "--keep-interval-updates",
        "2",
        "--no-epoch-checkpoints",
        "--disable-validation",
        updates=updates,
    )


def test_second_training_on_a_save_dir_in_use_refuses_and_names_the_first(tiny_data, tmp_path):
    """The issue's case: two trainings on one folder (seeds 1 and 2). The first is paused once
    it has saved checkpoints, while the second starts and ends."""
    save = tmp_path / "save"
    first = _start(_run_args(tiny_data, save, 1, 30))
    try:
        _wait_until(lambda: (save / "checkpoint_1_2.pt").exists(), first, "saved checkpoint_1_2.pt")
        first.send_signal(signal.SIGSTOP)
        before = _hashes(save)
        second = run(_run_args(tiny_data, save, 2, 14), check=False, timeout=DEADLINE_S)
        after = _hashes(save)
        first.send_signal(signal.SIGCONT)
        _, err = first.communicate(timeout=DEADLINE_S)
    finally:
        if first.poll() is None:
            first.kill()
    assert second.returncode == 1
    lines = [line for line in second.stderr.splitlines() if line.startswith("fairseq_ext:")]
    assert len(lines) == 1 and re.fullmatch(
        rf"fairseq_ext: error: --save-dir {re.escape(str(save))} is in use by another training: process {first.pid} "
        rf"\(.*fairseq-train .*\) on {re.escape(socket.gethostname())}, started \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC "
        rf"holds {re.escape(str(save / 'train.lock'))}; wait for it to end \(or stop it\), or give this run another "
        r"--save-dir",
        lines[0],
    ), second.stderr[-2000:]
    assert "Traceback" not in second.stderr
    assert after == before  # the second run wrote nothing
    assert first.returncode == 0, err[-2000:]
    assert "train.lock" not in os.listdir(save)  # removed when the first run ended
    assert _state(save / "checkpoint_last.pt") == (30, 1)  # the first run's, to its last update


def test_lock_left_by_a_killed_training_is_taken_over_and_named(tiny_data, tmp_path):
    save = tmp_path / "save"
    lock = save / "train.lock"
    killed = _start(_run_args(tiny_data, save, 1, 1000))
    try:
        _wait_until(_holds_lock(lock, killed), killed, "took the lock")
        record = lock.read_text().strip()
    finally:
        killed.kill()
        killed.wait(timeout=DEADLINE_S)
    assert lock.exists()  # SIGKILL: nothing removed it; the kernel released the lock itself
    proc = run(_run_args(tiny_data, save, 1, 2), timeout=DEADLINE_S)
    pid, host, started = record.split(maxsplit=2)
    assert (
        f"fairseq_ext: took over {lock} from process {pid} on {host}, started {started}, which is no longer "
        "running (killed?)"
    ) in proc.stderr.splitlines()
    assert "train.lock" not in os.listdir(save)  # removed when the run ended
    assert _state(save / "checkpoint_last.pt")[0] == 2


def test_resume_past_the_budget_trains_nothing_and_says_so(tiny_data, tmp_path):
    """fairseq resumed a 2-update checkpoint with --max-update 1 to update 3, overwriting
    checkpoint_last.pt; past --max-epoch it trained nothing, without a word."""
    for budget, spent, why in (
        (["--max-update", "2"], ["--max-update", "1"], "is at update 2, and --max-update is 1"),
        (["--max-epoch", "1"], ["--max-epoch", "1"], "has finished epoch 1, and --max-epoch is 1"),
    ):
        save = tmp_path / budget[0].strip("-")
        run(train_args(tiny_data, save, "--disable-validation", *budget, updates=0))
        before = _hashes(save)
        proc = run(
            train_args(tiny_data, save, "--disable-validation", *spent, updates=0), check=False
        )
        assert proc.returncode == 0
        assert [line for line in proc.stderr.splitlines() if line.startswith("fairseq_ext:")] == [
            f"fairseq_ext: {save / 'checkpoint_last.pt'} {why}: nothing to train; the checkpoints in {save} are left "
            "as they are (give a larger --max-update or --max-epoch to train on)"
        ]
        assert "Traceback" not in proc.stderr
        assert _hashes(save) == before

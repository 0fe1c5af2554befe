"""Ctrl-C in a real command of the plugin: the terminal sends SIGINT to the command's process
group; the command ends quietly (no ``KeyboardInterrupt`` traceback), by SIGINT, which the shell
shows as status 130, and leaves its data as they were. Checked mid-way through decoding
(``fairseq-generate``) and while ``fairseq-interactive`` waits for input."""

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import USER_DIR, cli_env, generate_args, train_args

DEADLINE_S = 300


def _hashes(folder):
    return {
        name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
        for name in sorted(os.listdir(folder))
    }


def _interrupted(args, started, stream):
    """Run ``args`` in a session of its own until a line of ``stream`` ("stdout" or "stderr")
    holds ``started`` (a ``Path``: until that file exists), then press Ctrl-C (SIGINT to the
    process group). Returns the exit status and the whole standard error."""
    # SIGINT as a terminal user's command has it: `make test` runs pytest in the background, where
    # the shell ignores SIGINT and its children inherit that (Python then installs no handler)
    proc = subprocess.Popen(
        [str(a) for a in args],
        env=cli_env() | {"PYTHONUNBUFFERED": "1"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        seen = []
        while isinstance(started, Path) and not started.exists() and proc.poll() is None:
            time.sleep(0.05)
        for line in [] if isinstance(started, Path) else getattr(proc, stream):
            seen.append(line)
            if started in line:
                break
        assert proc.poll() is None, "".join(seen)[-2000:]
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, "".join(seen) + err if stream == "stderr" else err


@pytest.mark.parametrize("command", ["fairseq-generate", "fairseq-interactive"])
def test_ctrl_c_ends_the_command_quietly_with_status_130(command, tiny_data, tiny_checkpoint):
    before = _hashes(tiny_data)
    if (
        command == "fairseq-generate"
    ):  # one sentence a batch over the 400 training pairs: seconds of decoding
        args = generate_args(tiny_data, tiny_checkpoint, "--batch-size", "1", subset="train")
        code, err = _interrupted(args, "H-", "stdout")
    else:
        args = [
            command,
            tiny_data,
            "--user-dir",
            USER_DIR,
            "--task",
            "cmlm_hybrid",
            "-s",
            "en",
            "-t",
            "de",
            "--path",
            tiny_checkpoint,
        ]
        code, err = _interrupted(args, "Type the input sentence", "stderr")
    assert code == -signal.SIGINT  # what the shell shows as $? 130
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-2000:]
    assert not [line for line in err.splitlines() if line.startswith("fairseq_ext: error")]
    assert _hashes(tiny_data) == before


def test_ctrl_c_with_dataloader_workers_ends_quietly_every_time(tiny_data, tiny_checkpoint):
    """Two DataLoader workers, which the same Ctrl-C reaches: a worker that ended first made
    fairseq-generate fail with ``DataLoader worker ... exited unexpectedly`` (about 1 in 5)."""
    before = _hashes(tiny_data)
    args = generate_args(
        tiny_data, tiny_checkpoint, "--batch-size", "1", "--num-workers", "2", subset="train"
    )
    for _ in range(4):
        code, err = _interrupted(args, "H-", "stdout")
        assert code == -signal.SIGINT
        assert "Traceback" not in err and "Error" not in err, err[-2000:]
    assert _hashes(tiny_data) == before


def test_an_error_raised_while_ctrl_c_unwinds_ends_quietly_by_sigint():
    """The exception a command of the plugin's tasks ends with was raised while a Ctrl-C
    unwound (as a DataLoader raises for a worker the same Ctrl-C ended): no traceback, the
    process ends by SIGINT; the same exception without the Ctrl-C keeps its traceback."""
    program = (
        "import sys\n"
        "from fairseq_ext import plugin\n"
        "from fairseq_ext.fairseq_changes import patch_scope\n"
        "plugin.load()\n"
        "with patch_scope.serving('cmlm_hybrid'):\n"
        "    try:\n"
        "        if sys.argv[1] == 'ctrl-c':\n"
        "            raise KeyboardInterrupt\n"
        "    finally:\n"
        "        raise RuntimeError('DataLoader worker (pid(s) 1) exited unexpectedly')\n"
    )
    for case, code, traceback in (("ctrl-c", -signal.SIGINT, False), ("none", 1, True)):
        proc = subprocess.run(
            [sys.executable, "-c", program, case],
            env=cli_env(),
            capture_output=True,
            text=True,
            timeout=DEADLINE_S,
        )
        assert proc.returncode == code, proc.stderr[-2000:]
        assert ("Traceback" in proc.stderr) is traceback, proc.stderr[-2000:]


def test_ctrl_c_during_training_with_dataloader_workers_keeps_the_checkpoints(tiny_data, tmp_path):
    """fairseq-train with two DataLoader workers, Ctrl-C once its first epoch is saved: it ends
    quietly by SIGINT, and ``checkpoint_last.pt`` loads."""
    from fairseq import checkpoint_utils

    before = _hashes(tiny_data)
    save = tmp_path / "ck"
    args = train_args(tiny_data, save, "--num-workers", "2", "--max-tokens", "500", updates=10**5)
    code, err = _interrupted(args, save / "checkpoint_last.pt", "stderr")
    assert code == -signal.SIGINT
    assert "Traceback" not in err and "Error" not in err, err[-2000:]
    state = checkpoint_utils.load_checkpoint_to_cpu(str(save / "checkpoint_last.pt"))
    assert state["optimizer_history"][-1]["num_updates"] > 0
    assert _hashes(tiny_data) == before

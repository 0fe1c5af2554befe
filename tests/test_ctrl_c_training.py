"""Ctrl-C in fairseq-train (the ``save-on-ctrl-c`` row of ``fairseq_ext.fairseq_changes``): a real
SIGINT to a real tiny training ends the update under way, saves ``checkpoint_last.pt`` at that
update, says so in one line with how to resume, ends with Ctrl-C's status and no traceback; the
same command then resumes from the saved update."""

import os
import signal
import subprocess
import threading

import torch

from tests.conftest import cli_env, run, train_args


def updates_in(checkpoint) -> int:
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    return state["optimizer_history"][-1]["num_updates"]


def test_ctrl_c_saves_the_last_update_and_the_same_command_resumes(tiny_data, tmp_path):
    save = tmp_path / "ckpt"
    # no save of fairseq's own before the Ctrl-C: one every 1000 epochs, none mid-epoch
    args = [
        *map(str, train_args(tiny_data, save, "--log-interval", "1", "--save-interval", "1000"))
    ]
    args[args.index("--max-update") + 1] = "100000"
    # as from a terminal: SIGINT's default action (a background `make test` ignores it, and its
    # children would inherit that), the command in a process group of its own, Ctrl-C to the group
    proc = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    watchdog = threading.Timer(300, proc.kill)  # a training that never logs fails, not hangs
    watchdog.start()
    for line in proc.stdout:  # fairseq logs each update (--log-interval 1) here
        if "num_updates=3," in line:
            break
    assert not (save / "checkpoint_last.pt").exists()
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    watchdog.cancel()
    assert proc.returncode in (-signal.SIGINT, 128 + signal.SIGINT), (proc.returncode, err[-2000:])
    assert "Traceback" not in err, err[-3000:]
    said = [line for line in err.splitlines() if "interrupted by Ctrl-C" in line]
    assert len(said) == 1, err[-2000:]
    stopped = updates_in(save / "checkpoint_last.pt")
    assert stopped >= 3 and said[0] == (
        f"fairseq-train: interrupted by Ctrl-C after update {stopped}: saved "
        f"{save / 'checkpoint_last.pt'}; the same command resumes from it"
    )
    args[args.index("--max-update") + 1] = str(stopped + 2)
    run(args)
    assert updates_in(save / "checkpoint_last.pt") == stopped + 2

"""What a real ``fairseq-train`` does when it starts on a ``--save-dir``: a second training on a
folder that a running one holds stops at once with one line naming the holder, and the first
run's checkpoints stay as it writes them; the lock that a killed run leaves is taken over and
named; a resume from a checkpoint that has spent ``--max-update`` or ``--max-epoch`` trains
nothing, leaves every file byte for byte as it was, and says so. A start the user names that is
no checkpoint file (missing, a folder, a dangling link), a ``checkpoint_last.pt`` that is a
dangling link or a folder, a resume with other model options and a ``--seed`` out of range are
each one line and exit 1, with nothing trained or written (fairseq trained from update 0, or
under the new options, and exited 0)."""

import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest
import torch

from tests.conftest import cli_env, generate_args, run, train_args

DEADLINE_S = 300


def _hashes(folder):
    """Every entry of ``folder``: a file's sha256, a link's target, a folder's entries."""
    return {
        name: os.readlink(folder / name)
        if (folder / name).is_symlink()
        else _hashes(folder / name)
        if (folder / name).is_dir()
        else hashlib.sha256((folder / name).read_bytes()).hexdigest()
        for name in sorted(os.listdir(folder))
    }


def _one_line_error(proc, expected):
    """The run ended with exit 1 and ``expected`` as its one ``fairseq_ext:`` line."""
    assert proc.returncode == 1, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("fairseq_ext:")]
    assert lines == [f"fairseq_ext: error: {expected}"], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


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
        rf"fairseq_ext: error: --save-dir {re.escape(str(save))} is in use by another training: "
        rf"process {first.pid} \(.*fairseq-train .*\) on {re.escape(socket.gethostname())}, "
        r"started \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC "
        rf"holds {re.escape(str(save / 'train.lock'))}; wait for it to end \(or stop it\), or "
        r"give this run another --save-dir",
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
        f"fairseq_ext: took over {lock} from process {pid} on {host}, started {started}, which is "
        "no longer running (killed?)"
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
            f"fairseq_ext: {save / 'checkpoint_last.pt'} {why}: nothing to train; the checkpoints "
            f"in {save} are left as they are (give a larger --max-update or --max-epoch to train "
            "on)"
        ]
        assert "Traceback" not in proc.stderr
        assert _hashes(save) == before


@pytest.fixture(scope="module")
def trained(tiny_data, tmp_path_factory):
    """A ``--save-dir`` trained 2 updates (``hi_cmlm_transformer_tiny``, its default
    ``--hybrid-strategy fence_replace``): only ``checkpoint_last.pt``."""
    save = tmp_path_factory.mktemp("trained") / "save"
    run(train_args(tiny_data, save, "--disable-validation", updates=2))
    assert os.listdir(save) == ["checkpoint_last.pt"]
    return save


NOTHING = "nothing was trained (fairseq-train would have started from update 0)"
RESTORE_FIX = (
    "give the checkpoint file to resume from (one fairseq-train wrote), or leave --restore-file "
    f"out to resume --save-dir's checkpoint_last.pt; {NOTHING}"
)


@pytest.mark.parametrize(
    "option, given, expected",
    [
        (
            "--restore-file",
            "ckpts/checkpoint_best.pt",
            f"--restore-file {{d}}/ckpts/checkpoint_best.pt does not exist; {{d}}/ckpts holds "
            f"checkpoint_1_2.pt: {RESTORE_FIX}",
        ),
        (
            "--restore-file",
            "ckpts",
            f"--restore-file {{d}}/ckpts is a folder, not a checkpoint file; {{d}}/ckpts holds "
            f"checkpoint_1_2.pt: {RESTORE_FIX}",
        ),
        (
            "--restore-file",
            "link.pt",
            f"--restore-file {{d}}/link.pt is a link to {{d}}/unmounted/checkpoint_last.pt, which "
            f"does not exist; {RESTORE_FIX}",
        ),
        (
            "--finetune-from-model",
            "ckpts",
            "--finetune-from-model {d}/ckpts is a folder, not a checkpoint file; {d}/ckpts holds "
            f"checkpoint_1_2.pt: give the checkpoint file of the model to fine-tune; {NOTHING}",
        ),
        (
            "--finetune-from-model",
            "ckpts/model.pt",
            "--finetune-from-model {d}/ckpts/model.pt does not exist; {d}/ckpts holds "
            f"checkpoint_1_2.pt: give the checkpoint file of the model to fine-tune; {NOTHING}",
        ),
        (
            "--continue-once",
            "link.pt",
            "--continue-once {d}/link.pt is a link to {d}/unmounted/checkpoint_last.pt, which does "
            f"not exist; give the checkpoint file to continue from; {NOTHING}",
        ),
        (
            "--init-encoder-from",
            "teacher/checkpoint_best.pt",
            "--init-encoder-from {d}/teacher/checkpoint_best.pt does not exist (nor does its "
            "folder {d}/teacher); give the fairseq checkpoint file to start the encoder from",
        ),
        (
            "--init-decoder-from",
            "ckpts",
            "--init-decoder-from {d}/ckpts is a folder, not a checkpoint file; {d}/ckpts holds "
            "checkpoint_1_2.pt: give the fairseq checkpoint file to start the decoder from",
        ),
    ],
    ids=[
        "restore-file-missing",
        "restore-file-folder",
        "restore-file-dangling-link",
        "finetune-folder",
        "finetune-missing",
        "continue-once-dangling-link",
        "init-encoder-missing",
        "init-decoder-folder",
    ],
)
def test_a_named_start_that_is_no_checkpoint_file_is_one_line_and_nothing_is_trained(
    tiny_data, trained, tmp_path, option, given, expected
):
    """fairseq trained from update 0 and exited 0 for a missing or folder --restore-file, a folder
    --finetune-from-model and a dangling link; a missing --finetune-from-model was a traceback
    and a missing --init-encoder-from was worded as a --path problem."""
    (tmp_path / "ckpts").mkdir()
    shutil.copy(trained / "checkpoint_last.pt", tmp_path / "ckpts" / "checkpoint_1_2.pt")
    (tmp_path / "link.pt").symlink_to(tmp_path / "unmounted" / "checkpoint_last.pt")
    save = tmp_path / "save"
    proc = run(
        train_args(tiny_data, save, "--disable-validation", option, tmp_path / given, updates=2),
        check=False,
    )
    _one_line_error(proc, expected.format(d=tmp_path))
    assert not save.exists()  # nothing trained, nothing written


def test_a_restore_file_named_as_in_the_save_dir_is_given_its_path(tiny_data, trained, tmp_path):
    """fairseq reads --restore-file from the current folder: a name of --save-dir trained from
    update 0, exit 0."""
    save = tmp_path / "save"
    shutil.copytree(trained, save)
    shutil.copy(save / "checkpoint_last.pt", save / "checkpoint_1_2.pt")
    before = _hashes(save)
    args = train_args(tiny_data, "save", "--restore-file", "checkpoint_1_2.pt", updates=4)
    proc = run(args, check=False, cwd=tmp_path)
    _one_line_error(
        proc,
        "--restore-file checkpoint_1_2.pt does not exist; --restore-file is read from the current "
        f"folder, not from --save-dir: give save/checkpoint_1_2.pt; {NOTHING}",
    )
    assert _hashes(save) == before


@pytest.mark.parametrize("spoil", ["dangling-link", "folder"])
def test_a_checkpoint_last_that_is_a_dangling_link_or_a_folder_is_one_line(
    tiny_data, trained, tmp_path, spoil
):
    """fairseq took either for no checkpoint and trained from update 0, exit 0 (over the link)."""
    save = tmp_path / "save"
    shutil.copytree(trained, save)
    last = save / "checkpoint_last.pt"
    last.unlink()
    target = tmp_path / "unmounted" / "checkpoint_last.pt"
    if spoil == "folder":
        last.mkdir()
        expected = (
            f"--save-dir {save}: checkpoint_last.pt is a folder, not a checkpoint file, so the "
            f"training would start again from update 0; move it out of {save} (fairseq-train "
            "writes checkpoint_last.pt as a file)"
        )
    else:
        last.symlink_to(target)
        expected = (
            f"--save-dir {save}: checkpoint_last.pt is a link to {target}, which does not exist, "
            f"so the training would start again from update 0; make {target} available again (or "
            "link checkpoint_last.pt to an existing checkpoint), or remove the link to start a new "
            "training"
        )
    before = _hashes(save)
    proc = run(train_args(tiny_data, save, "--disable-validation", updates=4), check=False)
    _one_line_error(proc, expected)
    assert _hashes(save) == before


def test_resuming_with_other_model_options_is_refused_naming_both(tiny_data, trained, tmp_path):
    """fairseq trained the checkpoint's weights on under the new options and recorded them as
    the checkpoint's, exit 0; the same command with the checkpoint's options resumes."""
    save = tmp_path / "save"
    shutil.copytree(trained, save)
    last = save / "checkpoint_last.pt"
    before = _hashes(save)
    fix = (
        "(fairseq-train would train its weights on under this run's options and record them as "
        "the checkpoint's). Give a new --save-dir to train with these options (add "
        f"--finetune-from-model {last} to start from its weights), or the checkpoint's options "
        "to resume it"
    )
    for other, theirs, ours in (
        (
            ["--hybrid-strategy", "all_mask"],
            "--hybrid-strategy fence_replace",
            "--hybrid-strategy all_mask",
        ),
        (
            ["--arch", "cmlm_transformer"],
            "--arch hi_cmlm_transformer_tiny",
            "--arch cmlm_transformer",
        ),
        (["--dropout", "0.2"], "--dropout 0.1", "--dropout 0.2"),
    ):
        proc = run(
            train_args(tiny_data, save, "--disable-validation", *other, updates=4), check=False
        )
        _one_line_error(
            proc,
            f"--save-dir {save} holds a training with other model options: {last} was trained "
            f"with {theirs}, this run gives {ours} {fix}",
        )
        assert _hashes(save) == before
    run(train_args(tiny_data, save, "--disable-validation", updates=3))
    assert _state(last)[0] == 3


def test_a_seed_out_of_range_is_one_line(tiny_data, tiny_checkpoint, tmp_path):
    """numpy takes seeds 0 to 2**32 - 1 and fairseq adds the epoch: -1, 2**32 and 2**32 - 1 were
    tracebacks (``ValueError: Seed must be between 0 and 2**32 - 1``); 2**31 - 1 trains."""
    for seed in (-1, 2**32 - 1, 2**32):
        expected = (
            f"--seed {seed} is out of range: give a whole number from 0 to 2147483647 (fairseq "
            "seeds numpy with it plus the epoch number, and numpy takes 0 to 2**32 - 1)"
        )
        save = tmp_path / f"save{seed}"
        proc = run(train_args(tiny_data, save, "--seed", str(seed), updates=2), check=False)
        _one_line_error(proc, expected)
        assert not save.exists()
        results = tmp_path / f"results{seed}"
        proc = run(
            generate_args(
                tiny_data, tiny_checkpoint, "--seed", str(seed), "--results-path", results
            ),
            check=False,
        )
        _one_line_error(proc, expected)
        assert not results.exists()
    save = tmp_path / "largest"
    run(train_args(tiny_data, save, "--seed", str(2**31 - 1), "--disable-validation", updates=2))
    assert _state(save / "checkpoint_last.pt") == (2, 2**31 - 1)

"""Reliability of every model family: 2-rank CPU distributed training through fairseq's own
path (gloo, legacy_ddp) equals one process on the same combined batches; a SIGKILLed job
resumes from checkpoint_last.pt and ends where an uninterrupted run ends, and so does a run with
``--unsorted-batches`` continued in a later epoch; an interrupted
checkpoint copy never leaves a corrupt checkpoint_last.pt."""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest
import torch
from fairseq.file_io import PathManager

from tests.conftest import ROOT, TINY_DIMS, USER_DIR, cli_env, run


def hi_cmlm_args(tiny_data):
    # full_mask noise and no dropout: the run does not depend on how random numbers are
    # consumed, so two ranks and one process with --update-freq 2 must agree.
    return [
        tiny_data,
        "--user-dir",
        USER_DIR,
        "--task",
        "cmlm_hybrid",
        "--noise",
        "full_mask",
        "-s",
        "en",
        "-t",
        "de",
        "--arch",
        "hi_cmlm_transformer_tiny",
        *TINY_DIMS,
        "--criterion",
        "nat_loss",
        "--dropout",
        "0",
    ]


NO_DROPOUT = ["--dropout", "0", "--attention-dropout", "0", "--activation-dropout", "0"]


def prophetnet_args(tiny_data):
    return [
        tiny_data,
        "--user-dir",
        USER_DIR,
        "--task",
        "translation_prophetnet",
        "-s",
        "en",
        "-t",
        "de",
        "--arch",
        "prophetnet_tiny",
        *TINY_DIMS,
        "--criterion",
        "ngram_language_loss",
        *NO_DROPOUT,
    ]


def unilm_args(tiny_data):
    return [
        tiny_data,
        "--user-dir",
        USER_DIR,
        "--task",
        "unilm_seq2seq",
        "-s",
        "en",
        "-t",
        "de",
        "--arch",
        "unilm_transformer_tiny",
        "--attention-mask",
        "prefix",
        "--encoder-layers",
        "1",
        "--encoder-embed-dim",
        "32",
        "--encoder-ffn-embed-dim",
        "64",
        "--encoder-attention-heads",
        "2",
        "--criterion",
        "label_smoothed_cross_entropy",
        "--label-smoothing",
        "0.1",
        *NO_DROPOUT,
    ]


def posmask_args(mono_data):
    # Token and position masks are drawn per example from (seed, epoch, index) (fairseq's
    # MaskTokensDataset scheme), never from the rank, so both ranks draw what one process draws.
    return [
        mono_data,
        "--user-dir",
        USER_DIR,
        "--task",
        "position_masked_lm",
        "--arch",
        "position_masked_roberta_tiny",
        "--encoder-layers",
        "1",
        "--encoder-embed-dim",
        "32",
        "--encoder-ffn-embed-dim",
        "64",
        "--encoder-attention-heads",
        "2",
        "--criterion",
        "position_masked_lm",
        "--tokens-per-sample",
        "128",
        "--sample-break-mode",
        "eos",
        "--position-mask-prob",
        "0.2",
        *NO_DROPOUT,
    ]


FAMILIES = {
    "hi_cmlm": ("tiny_data", hi_cmlm_args),
    "prophetnet": ("tiny_data", prophetnet_args),
    "unilm": ("tiny_data", unilm_args),
    "posmask": ("mono_data", posmask_args),
}
# fairseq's distributed path on CPU (examples/scaling_out.sh cpu-gloo uses the same options)
GLOO = [
    "--cpu",
    "--ddp-backend",
    "legacy_ddp",
    "--distributed-backend",
    "gloo",
    "--distributed-no-spawn",
]
COMMON = [
    "--optimizer",
    "adam",
    "--lr",
    "1e-3",
    "--batch-size",
    "8",
    "--required-batch-size-multiple",
    "1",
    "--num-workers",
    "0",
    "--seed",
    "3",
    "--cpu",
    "--log-format",
    "simple",
    "--no-progress-bar",
]


TRAIN_AND_DUMP = ROOT / "tests" / "helpers" / "train_and_dump.py"


def family_args(request, family):
    fixture, make = FAMILIES[family]
    return [str(a) for a in make(request.getfixturevalue(fixture))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dumped(prefix, rank=0):
    return torch.load(f"{prefix}.rank{rank}", map_location="cpu", weights_only=True)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_two_gloo_ranks_match_one_process(request, family, tmp_path):
    args = (
        family_args(request, family)
        + COMMON
        + ["--max-update", "4", "--no-save", "--disable-validation"]
    )
    if family == "hi_cmlm":
        # the section-3.3 copy subset is drawn from each process's RNG stream, which two ranks
        # and one process with --update-freq 2 consume differently; the plumbing is what is compared
        args += ["--train-copy-share", "0"]
    port, ddp = free_port(), {"DUMP_PARAMS": str(tmp_path / "ddp")}

    def rank(r):
        return [
            sys.executable,
            TRAIN_AND_DUMP,
            *args,
            *GLOO,
            "--distributed-world-size",
            "2",
            "--distributed-init-method",
            f"tcp://127.0.0.1:{port}",
            "--distributed-rank",
            str(r),
        ]

    # rank 1 in a process of its own, rank 0 beside it forked by the tests' server
    # (tests.forked_cli)
    other = subprocess.Popen(
        rank(1), env=cli_env() | ddp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    first = run(rank(0), check=False, extra_env=ddp, timeout=600)
    if first.returncode != 0:
        other.kill()
    out = other.communicate(timeout=600)[0]
    assert first.returncode == 0, first.stdout[-1500:] + first.stderr[-1500:]
    assert other.returncode == 0, out[-3000:]
    # the one process, forked too
    run(
        [sys.executable, TRAIN_AND_DUMP, *args, "--update-freq", "2"],
        extra_env={"DUMP_PARAMS": str(tmp_path / "single")},
    )

    r0, r1, single = (
        dumped(tmp_path / "ddp", 0),
        dumped(tmp_path / "ddp", 1),
        dumped(tmp_path / "single"),
    )
    assert r0["num_updates"] == r1["num_updates"] == single["num_updates"] == 4
    for name, value in r0["model"].items():
        assert torch.equal(value, r1["model"][name]), f"ranks differ at {name}"
        assert torch.allclose(value.float(), single["model"][name].float(), atol=1e-5, rtol=1e-4), (
            name
        )


def _checkpoint_updates(path):
    state = torch.load(path, map_location="cpu", weights_only=True)
    return state["optimizer_history"][-1]["num_updates"], state


def _last_logged_update(log) -> int:
    """The last ``num_updates=N`` of fairseq's per-update log lines (--log-interval 1)."""
    found = re.findall(r"num_updates[= ](\d+)", log.read_text())
    return int(found[-1]) if found else 0


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_sigkill_and_resume_loses_nothing_beyond_the_checkpoint(request, family, tmp_path):
    interval = 4
    args = (
        family_args(request, family)
        + COMMON
        + [
            "--max-update",
            "16",
            "--save-interval-updates",
            str(interval),
            "--no-epoch-checkpoints",
            "--disable-validation",
            "--lr-scheduler",
            "inverse_sqrt",
            "--warmup-updates",
            "10",
            "--log-interval",
            "1",
        ]
    )
    reference = tmp_path / "uninterrupted"
    run(["fairseq-train", *args, "--save-dir", reference])

    crashed, log = tmp_path / "crashed", tmp_path / "crashed.log"
    with open(
        log, "w"
    ) as out:  # unbuffered, so that the log holds every update done before the kill
        proc = subprocess.Popen(
            ["fairseq-train", *args, "--save-dir", crashed],
            env=cli_env() | {"PYTHONUNBUFFERED": "1"},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        deadline = time.time() + 600
        while _last_logged_update(log) < 10:  # mid-interval: the checkpoint of update 8 is written
            assert proc.poll() is None, "training ended before it could be killed"
            assert time.time() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    done = _last_logged_update(log)
    saved, _ = _checkpoint_updates(crashed / "checkpoint_last.pt")  # readable: the copy is atomic
    assert (crashed / "checkpoint_1_8.pt").exists()
    # a kill between writing checkpoint_1_N.pt and copying it to checkpoint_last.pt (likelier on a
    # busy machine) leaves the newer complete checkpoint, which the resumption takes
    newest = max([saved] + [_checkpoint_updates(p)[0] for p in crashed.glob("checkpoint_1_*.pt")])
    assert (
        saved % interval == 0
        and newest % interval == 0
        and 10 <= done < 16
        and 8 <= saved <= newest <= done
    )
    lost = done - newest
    print(
        f"{family}: killed after update {done}; the newest complete checkpoint holds update "
        f"{newest}; {lost} update(s) redone"
    )
    assert lost <= interval  # nothing lost beyond the checkpoint interval

    resumed = run(["fairseq-train", *args, "--save-dir", crashed])
    assert f"@ {newest} updates" in resumed.stdout + resumed.stderr
    final_ref, ref_state = _checkpoint_updates(reference / "checkpoint_last.pt")
    final, state = _checkpoint_updates(crashed / "checkpoint_last.pt")
    assert final == final_ref == 16
    for name, value in ref_state["model"].items():
        assert torch.allclose(value, state["model"][name], atol=1e-6), name
    ref_opt, opt = (
        ref_state["last_optimizer_state"]["state"],
        state["last_optimizer_state"]["state"],
    )
    for k in ref_opt:
        for moment in ("exp_avg", "exp_avg_sq"):
            assert torch.allclose(ref_opt[k][moment], opt[k][moment], atol=1e-9)
    assert (
        ref_state["optimizer_history"][-1]["lr_scheduler_state"]
        == state["optimizer_history"][-1]["lr_scheduler_state"]
    )
    assert (
        ref_state["last_optimizer_state"]["param_groups"][0]["lr"]
        == state["last_optimizer_state"]["param_groups"][0]["lr"]
    )


@pytest.mark.parametrize("family", ["prophetnet", "unilm"])
def test_unsorted_batches_continued_in_a_later_epoch_end_where_one_run_ends(
    request, family, tmp_path
):
    # 400 pairs in batches of 32: 13 updates an epoch; the second command starts in epoch 2
    # (update 20) and crosses into epoch 3, as the Gigaword driver's chunks do
    args = (
        family_args(request, family)
        + COMMON
        + [
            "--batch-size",
            "32",
            "--unsorted-batches",
            "--no-epoch-checkpoints",
            "--disable-validation",
        ]
    )
    one, two = tmp_path / "one", tmp_path / "two"
    run(["fairseq-train", *args, "--max-update", "30", "--save-dir", one])
    run(["fairseq-train", *args, "--max-update", "20", "--save-dir", two])
    resumed = run(["fairseq-train", *args, "--max-update", "30", "--save-dir", two])
    assert "(epoch 2 @ 20 updates)" in resumed.stdout + resumed.stderr
    (final_one, one_state), (final_two, two_state) = (
        _checkpoint_updates(d / "checkpoint_last.pt") for d in (one, two)
    )
    assert final_one == final_two == 30
    assert (
        one_state["extra_state"]["train_iterator"]["epoch"]
        == two_state["extra_state"]["train_iterator"]["epoch"]
        == 3
    )
    for name, value in one_state["model"].items():
        assert torch.allclose(value, two_state["model"][name], atol=1e-6), name


def _copy_that_dies_halfway(src, dst, *args, **kwargs):
    data = open(src, "rb").read()
    with open(dst, "wb") as f:
        f.write(data[: len(data) // 2])
    raise OSError("killed while copying")


def test_interrupted_checkpoint_copy_keeps_the_old_file(tmp_path, monkeypatch):
    good, new = tmp_path / "checkpoint_last.pt", tmp_path / "checkpoint_1_8.pt"
    torch.save({"step": 4, "w": torch.ones(1000)}, good)
    torch.save({"step": 8, "w": torch.zeros(1000)}, new)
    monkeypatch.setattr(shutil, "copyfile", _copy_that_dies_halfway)
    with pytest.raises(OSError, match="killed while copying"):
        PathManager.copy(str(new), str(good), overwrite=True)
    assert torch.load(good, weights_only=True)["step"] == 4
    assert sorted(os.listdir(tmp_path)) == ["checkpoint_1_8.pt", "checkpoint_last.pt"]

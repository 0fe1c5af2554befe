"""reproduction/hi_cmlm/collect_shipped.py: the old and the new shipped student per strategy
(passes, length bins, sacreBLEU's paired bootstrap new against old), how each was trained read
from its checkpoint, the student's training run from its log."""

import json
import subprocess
import sys

import pytest

from reproduction.tests.test_collect_hicmlm import _corrupt, _sentence, _write_decoding
from tests.conftest import ROOT, cli_env

MODEL = ROOT / "examples" / "quickstart" / "model"
STRATEGIES = ("all_mask", "all_copied", "weighted_sum", "fence_replace")


def test_collect_shipped_compares_the_two_students(tmp_path):
    refs = [_sentence(k) for k in range(60)]
    ref = tmp_path / "val.de"
    ref.write_text("".join(r + "\n" for r in refs), encoding="utf-8")
    work = tmp_path / "shipped"
    bleu = {}
    for model, every in (("old", 3), ("new", 5)):
        (work / model).mkdir(parents=True)
        (work / model / "checkpoint.pt").symlink_to(MODEL / "checkpoint.pt")
        for k, s in enumerate(STRATEGIES):
            bleu[(model, s)] = _write_decoding(
                work / model / f"decode-{s}", refs, [_corrupt(r, every + k % 2) for r in refs]
            )
    log = tmp_path / "student.log"
    log.write_text(
        "| num_updates 2500 |\ndone training in 1000.5 seconds\n| num_updates 4000 |\n"
        "done training in 900 seconds\n"
    )
    pub = tmp_path / "pub"
    page = tmp_path / "page.md"
    page.write_text("a\n<!-- shipped:start -->\nold\n<!-- shipped:end -->\nb\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "reproduction.hi_cmlm.collect_shipped",
            "--work",
            work,
            "--ref",
            ref,
            "--old-commit",
            "abc1234",
            "--root",
            tmp_path,
            "--teacher",
            MODEL / "teacher.pt",
            "--student-log",
            log,
            "--student-command",
            "pretrain.sh",
            "--student-threads",
            "1",
            "--publish",
            pub,
            "--page",
            page,
        ],
        check=True,
        capture_output=True,
        text=True,
        env=cli_env(),
    )
    res = json.loads((pub / "shipped.json").read_text())
    for s in STRATEGIES:
        direct = subprocess.run(
            [
                "sacrebleu",
                str(ref),
                "-i",
                str(work / "old" / f"decode-{s}" / "hyp.txt"),
                str(work / "new" / f"decode-{s}" / "hyp.txt"),
                "-m",
                "bleu",
                "--paired-bs",
                "--paired-bs-n",
                "1000",
                "-f",
                "json",
            ],
            capture_output=True,
            text=True,
            env=cli_env(),
            check=True,
        ).stdout
        test = res["paired_bootstrap_new_vs_old"][s]
        assert test["p_value"] == pytest.approx(json.loads(direct)[1]["BLEU"]["p_value"])
        assert test["delta"] == pytest.approx(bleu[("new", s)] - bleu[("old", s)])
        assert (pub / "hypotheses" / f"shipped-new-{s}.txt").read_text() == (
            work / "new" / f"decode-{s}" / "hyp.txt"
        ).read_text()
    # how each model was trained comes from its checkpoint; the run from its log (two segments)
    saved = res["models"]["new"]["training"]
    assert saved["arch"] == "hi_cmlm_transformer_tiny" and saved["max_update"] == 4000
    assert res["student"]["updates"] == 4000 and res["student"]["train_seconds"] == 1900.5
    assert res["student"]["segments"] == 2 and res["student"]["hardware"].endswith("1 torch thread")
    assert res["teacher"]["updates"] > 0 and res["teacher"]["checkpoint"].endswith("teacher.pt")
    text = page.read_text()
    better = sum(bleu[("new", s)] > bleu[("old", s)] for s in STRATEGIES)
    assert f"the new model scores higher than the old one with {better} of 4 strategies" in text
    assert (
        saved["layers"] == "3+1" and "(3+1 layers, the paper's input" in text
    )  # the shipped student
    assert text.startswith("a\n<!-- shipped:start -->\n") and "\nold\n" not in text


def test_an_interrupted_segment_counts_its_last_logged_wall_time(tmp_path):
    from reproduction.hi_cmlm.collect_shipped import training_log

    log = tmp_path / "student.log"
    log.write_text(
        "| train | num_updates 100 | train_wall 50 | wall 60\n"
        "| train_inner | num_updates=150, train_wall=80, wall=95\n"  # killed here
        "| train | num_updates 100 | train_wall 40 | wall 45\n"  # resumed from update 100
        "| train | num_updates 200 | train_wall 90 | wall 101\n"
        "done training in 100.5 seconds\n"
    )
    run = training_log(log)
    assert run == {
        "updates": 200,
        "train_seconds": 95 + 100.5,
        "segments": 2,
        "encoder_from_teacher": False,
    }
    log.write_text("| train | num_updates 100 | train_wall 50 | wall 60\n")
    with pytest.raises(SystemExit, match="no finished training"):
        training_log(log)

"""python -m fairseq_ext.analysis.glue: the dev score of a predictions file (GLUE's
Matthews correlation for CoLA, accuracy for SST-2) checked against the formulas by hand."""

from __future__ import annotations

import math
import sys

import pytest

from fairseq_ext.analysis.glue import read_labels, score
from tests.conftest import ROOT, run

pytestmark = pytest.mark.cli  # the module's command runs forked (tests.forked_cli)

GOLD = "1 1 0 1 0 0 1 1 1 0 1 0".split()
PRED = "1 0 0 1 1 0 1 1 0 0 1 1".split()


def mcc_by_hand(gold, pred):
    tp = sum(g == p == "1" for g, p in zip(gold, pred))
    tn = sum(g == p == "0" for g, p in zip(gold, pred))
    fp = sum(g == "0" and p == "1" for g, p in zip(gold, pred))
    fn = sum(g == "1" and p == "0" for g, p in zip(gold, pred))
    return (tp * tn - fp * fn) / math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))


def test_mcc_and_accuracy_of_a_predictions_file(tmp_path):
    (tmp_path / "gold").write_text("\n".join(GOLD) + "\n")
    (tmp_path / "pred").write_text("\n".join(PRED) + "\n")
    assert read_labels(tmp_path / "pred") == PRED
    assert score("CoLA", GOLD, PRED) == pytest.approx(100 * mcc_by_hand(GOLD, PRED))
    assert score("SST-2", GOLD, PRED) == pytest.approx(100 * 8 / 12)
    out = run(
        [
            sys.executable,
            "-m",
            "fairseq_ext.analysis.glue",
            "score",
            "--task",
            "CoLA",
            "--gold",
            tmp_path / "gold",
            "--predictions",
            tmp_path / "pred",
        ],
        cwd=ROOT,
    ).stdout
    assert out == f"mcc {100 * mcc_by_hand(GOLD, PRED):.2f}\n"
    assert score("CoLA", GOLD, ["1"] * len(GOLD)) == 0.0  # one class predicted: no correlation


def test_a_short_predictions_file_is_refused(tmp_path):
    (tmp_path / "gold").write_text("\n".join(GOLD) + "\n")
    (tmp_path / "pred").write_text("\n".join(PRED[:-1]) + "\n")
    proc = run(
        [
            sys.executable,
            "-m",
            "fairseq_ext.analysis.glue",
            "score",
            "--task",
            "SST-2",
            "--gold",
            tmp_path / "gold",
            "--predictions",
            tmp_path / "pred",
        ],
        check=False,
        cwd=ROOT,
    )
    assert (
        proc.returncode == 1
        and proc.stderr.strip()
        == "error: 11 predictions for 12 dev examples; predict the whole dev split"
    )


def test_missing_inputs_are_one_line(tmp_path):
    """A checkpoint, data folder or labels file that is not there: one line naming it, exit 2."""
    (tmp_path / "gold").write_text("1\n")
    cases = {
        (
            "predict",
            "--checkpoint",
            tmp_path / "none.pt",
            "--data",
            tmp_path,
            "--output",
            tmp_path / "p",
        ): f"error: --checkpoint {tmp_path / 'none.pt'}: no such file",
        (
            "score",
            "--task",
            "CoLA",
            "--gold",
            tmp_path / "gold",
            "--predictions",
            tmp_path / "p",
        ): f"error: --predictions {tmp_path / 'p'}: no such file",
    }
    (tmp_path / "ckpt.pt").write_bytes(b"")
    cases[
        (
            "predict",
            "--checkpoint",
            tmp_path / "ckpt.pt",
            "--data",
            tmp_path,
            "--output",
            tmp_path / "p",
        )
    ] = f"error: --data {tmp_path}: no label/dict.txt there"
    for args, start in cases.items():
        proc = run(
            [sys.executable, "-m", "fairseq_ext.analysis.glue", *args], check=False, cwd=ROOT
        )
        assert (
            proc.returncode == 2 and proc.stderr.startswith(start) and proc.stderr.count("\n") == 1
        ), proc.stderr

"""reproduction/position_masking/glue_score.py: the dev score of a predictions file (GLUE's
Matthews correlation for CoLA, accuracy for SST-2) checked against the formulas by hand."""
from __future__ import annotations

import math
import subprocess
import sys

import pytest

from reproduction.position_masking.glue_score import read_labels, score
from tests.conftest import ROOT

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
    out = subprocess.run([sys.executable, "-m", "reproduction.position_masking.glue_score", "score", "--task", "CoLA",
                          "--gold", tmp_path / "gold", "--predictions", tmp_path / "pred"],
                         capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out == f"mcc {100 * mcc_by_hand(GOLD, PRED):.2f}\n"
    assert score("CoLA", GOLD, ["1"] * len(GOLD)) == 0.0  # one class predicted: no correlation


def test_a_short_predictions_file_is_refused(tmp_path):
    (tmp_path / "gold").write_text("\n".join(GOLD) + "\n")
    (tmp_path / "pred").write_text("\n".join(PRED[:-1]) + "\n")
    proc = subprocess.run([sys.executable, "-m", "reproduction.position_masking.glue_score", "score", "--task",
                           "SST-2", "--gold", tmp_path / "gold", "--predictions", tmp_path / "pred"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 1 and proc.stderr.strip() == ("glue_score: error: 11 predictions for 12 dev examples; "
                                                           "predict the whole dev split")


def test_published_scores_are_the_kept_predictions_scored_against_dev():
    """Every dev score of results/glue.json is what scikit-learn gives the run's kept
    predictions against the task's dev labels (read from dev.tsv by data_prep/glue.py)."""
    import json

    from tests.conftest import shared_data

    sys.path.insert(0, str(ROOT / "data_prep"))  # glue.py imports its neighbours
    import glue

    folder = shared_data("glue")
    results = json.loads((ROOT / "reproduction" / "position_masking" / "results" / "glue.json").read_text())
    gold = {task: [label for _, label in glue.read_tsv(folder / task / "dev.tsv", glue.LABELS[task])]
            for task in ("CoLA", "SST-2")}
    runs = {(r["task"], r["start"], r["straight_through"], seed): value
            for r in results["rows"] for seed, value in zip(r["seeds"], r["dev_per_seed"])}
    assert len(runs) == 60
    for (task, start, st, seed), value in runs.items():
        kept = ROOT / results["commands"][f"{task}/{start}-st{int(st)}-s{seed}"]["predictions"]
        assert score(task, gold[task], read_labels(kept)) == pytest.approx(value, abs=1e-9)

"""The GLUE tables' dev scores (Table 3 on GLUE and the full-budget table) are what
``fairseq_ext.analysis.glue`` gives each run's kept predictions against the task's dev labels."""

from __future__ import annotations

import sys

import pytest

from fairseq_ext.analysis.glue import read_labels, score
from tests.conftest import ROOT


def test_published_scores_are_the_kept_predictions_scored_against_dev():
    """Every dev score of results/glue.json is what scikit-learn gives the run's kept
    predictions against the task's dev labels (read from dev.tsv by data_prep/glue.py)."""
    import json

    from tests.conftest import shared_data

    sys.path.insert(0, str(ROOT / "data_prep"))  # glue.py imports its neighbours
    import glue

    folder = shared_data("glue")
    results = json.loads(
        (ROOT / "reproduction" / "position_masking" / "results" / "glue.json").read_text()
    )
    gold = {
        task: [label for _, label in glue.read_tsv(folder / task / "dev.tsv", glue.LABELS[task])]
        for task in ("CoLA", "SST-2")
    }
    runs = {
        (r["task"], r["start"], r["straight_through"], seed): value
        for r in results["rows"]
        for seed, value in zip(r["seeds"], r["dev_per_seed"])
    }
    assert len(runs) == 60
    for (task, start, st, seed), value in runs.items():
        kept = ROOT / results["commands"][f"{task}/{start}-st{int(st)}-s{seed}"]["predictions"]
        assert score(task, gold[task], read_labels(kept)) == pytest.approx(value, abs=1e-9)


def test_full_budget_scores_are_the_kept_predictions_scored_against_dev():
    """Every full-budget run file's dev score is its own kept predictions scored against dev."""
    import json

    from tests.conftest import shared_data

    sys.path.insert(0, str(ROOT / "data_prep"))
    import glue

    folder = shared_data("glue")
    runs = sorted(
        (ROOT / "reproduction" / "position_masking" / "results" / "glue_full").glob("*/*.json")
    )
    assert runs
    for path in runs:
        run = json.loads(path.read_text())
        gold = [
            label
            for _, label in glue.read_tsv(
                folder / run["task"] / "dev.tsv", glue.LABELS[run["task"]]
            )
        ]
        assert score(run["task"], gold, run["predictions"]) == pytest.approx(
            run["dev"], abs=1e-9
        ), path.name

"""reproduction/position_masking/glue_full.py without fine-tuning: its epoch budget in updates,
the TASK=EPOCHS option, the learning-rate choice and the resumption from the kept records."""
import argparse
import json
import math

import pytest

from reproduction.position_masking.glue_full import BATCH, FullBudget, epochs_option


def driver(tmp_path, epochs=None) -> FullBudget:
    """A driver over ``tmp_path`` with no data preparation (only what it checks before a run)."""
    d = FullBudget.__new__(FullBudget)
    d.a = argparse.Namespace(epochs=epochs or {"CoLA": 3, "SST-2": 1}, curve_points=6)
    d.work, d.results = tmp_path / "work", tmp_path / "results"
    return d


def test_epochs_become_updates_of_batch_32(tmp_path):
    d = driver(tmp_path, {"CoLA": 3, "SST-2": 0.5})
    for task, n in (("CoLA", 8551), ("SST-2", 67349)):
        raw = d.work / "data" / task / "raw"
        raw.mkdir(parents=True)
        (raw / "train.label").write_text("1\n" * n)
    assert BATCH == 32
    assert d.updates("CoLA") == 3 * 268  # 8551 sentences: 267 full batches and one of 7
    assert d.updates("SST-2") == math.ceil(0.5 * 2105)


def test_epochs_option_names_task_and_number():
    assert epochs_option("SST-2=0.5") == ("SST-2", 0.5)
    for bad in ("MNLI=3", "CoLA", "CoLA=0"):
        with pytest.raises(argparse.ArgumentTypeError):
            epochs_option(bad)


def test_the_best_final_dev_score_chooses_the_learning_rate(tmp_path):
    grid = {"2e-5": {"dev": 40.1}, "5e-5": {"dev": 47.3}, "1e-4": {"dev": 45.0}}
    assert driver(tmp_path).chosen_lr("CoLA", grid) == "5e-5"


def test_a_kept_run_is_reused_with_its_settings_and_refused_with_others(tmp_path):
    d = driver(tmp_path)
    raw = d.work / "data" / "CoLA" / "raw"
    raw.mkdir(parents=True)
    (raw / "train.label").write_text("1\n" * 64)  # 2 batches an epoch: 6 updates
    kept = {"task": "CoLA", "straight_through": True, "seed": 2, "lr": 5e-5, "updates": 6, "batch": 32, "dev": 12.5}
    (d.results / "CoLA").mkdir(parents=True)
    (d.results / "CoLA" / "st1-s2.json").write_text(json.dumps(kept))
    assert d.finetune_run("CoLA", "st1-s2", True, 2, "5e-5") == kept  # nothing runs
    with pytest.raises(SystemExit, match="made with other settings"):
        d.finetune_run("CoLA", "st1-s2", True, 2, "1e-4")

"""reproduction/position_masking/glue_full.py without fine-tuning: its epoch budget in updates,
the TASK=EPOCHS option, the learning-rate choice and the resumption from the kept records."""

import argparse
import json
import math
import shutil
import sys
from pathlib import Path

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
    kept = {
        "task": "CoLA",
        "straight_through": True,
        "seed": 2,
        "lr": 5e-5,
        "updates": 6,
        "batch": 32,
        "dev": 12.5,
    }
    (d.results / "CoLA").mkdir(parents=True)
    (d.results / "CoLA" / "st1-s2.json").write_text(json.dumps(kept))
    assert d.finetune_run("CoLA", "st1-s2", True, 2, "5e-5") == kept  # nothing runs
    with pytest.raises(SystemExit, match="made with other settings"):
        d.finetune_run("CoLA", "st1-s2", True, 2, "1e-4")


def test_collector_pairs_the_arms_by_seed_and_checks_the_majority_class(tmp_path):
    from reproduction.position_masking.collect_glue_full import majority, markdown, summarise

    def run(name, lr, seed, st, dev):
        folder = tmp_path / "SST-2"
        folder.mkdir(exist_ok=True)
        (folder / f"{name}.json").write_text(
            json.dumps(
                {
                    "lr": lr,
                    "seed": seed,
                    "straight_through": st,
                    "dev": dev,
                    "updates": 2105,
                    "epochs": 1,
                    "wall_seconds": 10,
                    "hardware": "cpu",
                    "validations": [{"num_updates": 2105, "accuracy": dev}],
                }
            )
        )

    run("lr5e-05-s0", 5e-5, 0, False, 88.0)
    run("lr1e-04-s0", 1e-4, 0, False, 87.0)
    for seed, (a, b) in enumerate([(88.0, 88.5), (87.0, 88.0), (89.0, 89.2)], start=1):
        run(f"st0-s{seed}", 5e-5, seed, False, a)
        run(f"st1-s{seed}", 5e-5, seed, True, b)
    gold = {"SST-2": ["1"] * 6 + ["0"] * 4}
    assert majority(gold["SST-2"], "SST-2") == 60.0 and majority(["0", "1"], "CoLA") == 0.0
    s = summarise(tmp_path, gold)["tasks"]["SST-2"]
    assert s["ordinary"]["mean"] == pytest.approx(88.0) and s["straight_through"]["n"] == 3
    assert s["test"]["mean_difference"] == pytest.approx((0.5 + 1.0 + 0.2) / 3)
    assert s["missing"] == ["st0-s4", "st1-s4", "st0-s5", "st1-s5"]
    text = markdown(summarise(tmp_path, gold))
    assert (
        "| CoLA (MCC x 100) | not run yet |" in text
        and "both arms are above the majority class" in text
    )
    assert "4 runs not finished yet" in text
    assert (
        "SST-2 dev curve, mean of the 6 seed runs of both arms at each validation (update: "
        "score): 2105: 88.3; each run's last validation is 0.00 points below its best on average."
    ) in text


def test_the_curve_line_averages_seed_runs_per_validation_and_measures_the_last_against_the_best():
    from reproduction.position_masking.collect_glue_full import seed_curve

    curves = {
        "lr1e-4-s0": [[100, 50.0], [200, 99.0]],  # a grid run: not a seed run
        "st0-s1": [[100, 80.0], [200, 86.0], [300, 85.0]],
        "st1-s1": [[100, 82.0], [200, None], [300, 84.0]],
    }
    assert seed_curve(curves, "SST-2") == (
        "- SST-2 dev curve, mean of the 2 seed runs of both arms at each validation (update: "
        "score): 100: 81.0, 200: 86.0, 300: 84.5; each run's last validation is 0.50 points "
        "below its best on average."
    )
    assert seed_curve({"lr1e-4-s0": [[100, 50.0]]}, "CoLA") is None


def test_a_command_reports_the_cpu_seconds_its_process_used(tmp_path):
    """What a run's record keeps beside its wall time: the child's own CPU time, not a sleep's."""
    import os
    import sys
    import threading

    d = driver(tmp_path)
    d.work.mkdir(parents=True)
    d.lock, d.env = threading.Lock(), dict(os.environ)
    busy = d.sh(
        [
            sys.executable,
            "-c",
            "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass",
        ]
    )
    idle = d.sh([sys.executable, "-c", "import time; time.sleep(0.5)"])
    assert busy >= 0.45 and idle < 0.3
    with pytest.raises(RuntimeError, match="failed"):
        d.sh([sys.executable, "-c", "raise SystemExit(3)"])


class DiesOnce(FullBudget):
    """A driver whose fine-tuning of run ``cut`` dies once: its process stops after the checkpoint
    of update 6 (``--max-update 6`` appended) and leaves a cut-short checkpoint of update 8 behind,
    as a process killed while writing it does."""

    died = False

    def sh(self, cmd, log=None, append=False):
        if (
            cmd[0] == "fairseq-train"
            and Path(cmd[cmd.index("--save-dir") + 1]).name == "cut"
            and not self.died
        ):
            self.died = True
            super().sh([*cmd, "--max-update", 6], log, append)
            save_dir = Path(cmd[cmd.index("--save-dir") + 1])
            (save_dir / "checkpoint_2_8.pt").write_bytes(
                (save_dir / "checkpoint_2_6.pt").read_bytes()[:5000]
            )
            raise RuntimeError("killed")
        return super().sh(cmd, log, append)

    def predict_dev(self, run, data):
        """Also keeps the final weights and the log, which go with the run's folder once its record
        is written."""
        shutil.copy(run / "checkpoint_last.pt", self.work / f"{run.name}-final.pt")
        shutil.copy(run / "train.log", self.work / f"{run.name}-train.log")
        return super().predict_dev(run, data)


def test_a_killed_run_continues_from_its_checkpoint_to_the_uninterrupted_result(tmp_path):
    """A tiny BERT fine-tuned for 10 updates (2 epochs of 5), once straight through and once
    killed after update 6 and run again: the second ends with the same weights, curve and dev
    predictions, and its record names both segments."""
    pytest.importorskip("transformers")
    import torch

    from fairseq_ext.checkpoints.loading import safe_load
    from tests.conftest import read_sample, run, save_tiny_bert, script_env, write_lines

    sentences = [line.lower() for line in read_sample("train", "en", 160)]
    bert = save_tiny_bert(
        tmp_path / "work" / "minilm" / "all-MiniLM-L6-v2", " ".join(sentences)
    )  # where prepare looks
    run(
        [
            sys.executable,
            "-m",
            "fairseq_ext.convert",
            "from-transformers",
            bert,
            tmp_path / "work" / "minilm" / "converted",
        ]
    )
    rows = [f"{s}\t{i % 2}" for i, s in enumerate(sentences)]
    (tmp_path / "glue" / "CoLA").mkdir(parents=True)
    write_lines(tmp_path / "glue" / "CoLA" / "train.tsv", rows)
    write_lines(tmp_path / "glue" / "CoLA" / "dev.tsv", rows[:24])
    d = DiesOnce(
        argparse.Namespace(
            work=tmp_path / "work",
            results=tmp_path / "results",
            glue=str(tmp_path / "glue"),
            plugin_root=None,
            tasks=["CoLA"],
            epochs={"CoLA": 2},
            curve_points=5,
        )
    )
    d.env["PATH"] = script_env()["PATH"]  # its fairseq commands forked (tests.forked_cli)
    d.prepare()
    assert d.updates("CoLA") == 10
    whole = d.finetune_run("CoLA", "whole", True, 3, "1e-3")
    with pytest.raises(RuntimeError, match="killed"):
        d.finetune_run("CoLA", "cut", True, 3, "1e-3")
    cut = d.finetune_run("CoLA", "cut", True, 3, "1e-3")

    assert [s["from_update"] for s in cut["segments"]] == [0, 6] and [
        s["from_update"] for s in whole["segments"]
    ] == [0]
    assert (
        "checkpoint_2_6.pt (epoch 2 @ 6 updates)" in (d.work / "cut-train.log").read_text()
    )  # not from the start
    assert (
        cut["segments"][0]["cpu_seconds"] is None and cut["train_cpu_seconds"] is None
    )  # a killed process's is unknown
    assert (
        cut["command"][:-1] == whole["command"][:-1] and "--keep-interval-updates" in cut["command"]
    )  # but --save-dir
    assert cut["predictions"] == whole["predictions"] and cut["dev"] == whole["dev"]
    fields = ("num_updates", "loss", "accuracy", "mcc")
    curve = [[v.get(f) for f in fields] for v in cut["validations"]]
    assert curve == [[v.get(f) for f in fields] for v in whole["validations"]]
    assert [row[0] for row in curve] == [2, 4, 5, 6, 8, 10]
    weights = [safe_load(d.work / f"{name}-final.pt")["model"] for name in ("whole", "cut")]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_fairseq_batching_leaves_out_what_the_page_says():
    """docs/results/position-masking.md: with fairseq's default batch multiple of 8, 267 batches
    of CoLA's 8,551 sentences (7 left out), 2,105 of SST-2's 67,349 (the last of 16, 5 left out)
    and 16 of CoLA's 516 dev sentences (4 left out of fairseq-train's validations)."""
    from fairseq.data import data_utils

    from reproduction.position_masking.glue_run import ROOT

    for n, batches, used in ((8551, 267, 8544), (67349, 2105, 67344), (516, 16, 512)):
        b = data_utils.batch_by_size(
            list(range(n)), lambda i: 20, max_sentences=32, required_batch_size_multiple=8
        )
        assert (len(b), sum(map(len, b))) == (batches, used)
        every = data_utils.batch_by_size(
            list(range(n)), lambda i: 20, max_sentences=32, required_batch_size_multiple=1
        )
        assert sum(map(len, every)) == n
    page = " ".join((ROOT / "docs" / "results" / "position-masking.md").read_text().split())
    assert (
        "makes 267 batches of 32 of CoLA's 8,551 sentences and leaves the other 7 of each "
        "shuffled epoch out"
        in page
        and "SST-2's last batch with 16 of the 21 remaining sentences (5 left out)" in page
        and "cover 512 of the 516 dev sentences" in page
    )

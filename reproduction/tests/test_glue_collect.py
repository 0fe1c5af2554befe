"""reproduction/position_masking/collect_glue.py on a work folder of made-up finished runs: the
rows, seed-paired tests (checked against the paired t statistic by hand), the missing runs
and the figures."""

from __future__ import annotations

import json
import math
import statistics

import pytest
from scipy import stats

from reproduction.position_masking.collect_glue import markdown, page_summary, plot, summarise

SEEDS = [1, 2, 3]


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def fake_work(tmp_path):
    work = tmp_path / "work"
    for name, prob, pos in (("p0", 0.0, None), ("p0.10", 0.1, 2.5)):
        write(
            work / "pretrain" / name / "result.json",
            {
                "command": ["fairseq-train", "--lr", "2e-4"],
                "wall_seconds": 10.0,
                "hardware": "cpu",
                "probability": prob,
                "chance_position_accuracy": 1.5625,
                "validations": [
                    {
                        "num_updates": 100.0,
                        "mlm_accuracy": 10.0,
                        **({"position_accuracy": pos} if pos else {}),
                    }
                ],
            },
        )
    write(
        work / "pretrain" / "probe-lr1e-3" / "result.json",
        {
            "command": ["fairseq-train", "--lr", "2e-4", "--lr", "1e-3"],
            "wall_seconds": 10.0,
            "hardware": "cpu",
            "probability": 0.1,
            "lr": 1e-3,
            "updates": 100,
            "extra_options": ["--lr", "1e-3"],
            "chance_position_accuracy": 1.5625,
            "validations": [{"num_updates": 100.0, "mlm_accuracy": 9.0, "position_accuracy": 1.5}],
        },
    )
    (work / "preprocess.log").write_text(
        "INFO:fairseq_cli.preprocess:[None] /w/wordpiece/train.txt: 2191 sents, "
        "213594 tokens, 0.05% replaced (by <unk>)\n"
    )
    (work / "glue-CoLA.log").write_text(
        "glue: /g/CoLA/dev.tsv: read 516 examples, wrote 516 to /w/raw/valid.* "
        "(label 0: 162, label 1: 354; 0 cut to 62 pieces)\n"
    )
    write(
        work / "select" / "chosen.json",
        {"task": "CoLA", "scores": {"5e-5": 1.0, "1.5e-4": 2.0}, "chosen": "1.5e-4"},
    )
    dev = {}
    for start, base in (("minilm", 10.0), ("p0", 20.0), ("p0.10", 21.0)):
        for st in (0, 1):
            for seed in SEEDS:
                if (start, st, seed) == ("minilm", 1, 3):
                    continue  # not finished
                value = (
                    base + st * 0.5 + seed * 1.0 + (0.3 * seed * seed if start == "p0.10" else 0.0)
                )
                dev[(start, st, seed)] = value
                write(
                    work / "finetune" / "CoLA" / f"{start}-st{st}-s{seed}" / "result.json",
                    {
                        "command": ["fairseq-train"],
                        "seed": seed,
                        "wall_seconds": 5.0,
                        "hardware": "cpu",
                        "lr": 1.5e-4,
                        "updates": 100,
                        "dev": value,
                        "predictions": "x",
                        "validations": [
                            {"num_updates": 50.0, "mcc": value - 5},
                            {"num_updates": 100.0, "mcc": value},
                        ],
                    },
                )
    return work, dev


def test_rows_paired_tests_and_missing_runs(tmp_path):
    work, dev = fake_work(tmp_path)
    s = summarise(work, ["0", "0.10"], SEEDS)
    row = next(
        r
        for r in s["rows"]
        if r["task"] == "CoLA" and r["start"] == "p0.10" and not r["straight_through"]
    )
    values = [dev[("p0.10", 0, seed)] for seed in SEEDS]
    assert row["dev_per_seed"] == values and row["mean"] == statistics.fmean(values)
    assert row["std"] == statistics.stdev(values)
    test = next(
        t
        for t in s["tests"]
        if t["claim"] == "position masking" and t["task"] == "CoLA" and not t["straight_through"]
    )
    diff = [dev[("p0.10", 0, seed)] - dev[("p0", 0, seed)] for seed in SEEDS]  # 1.3, 2.2, 3.7
    t = statistics.fmean(diff) / (statistics.stdev(diff) / math.sqrt(len(diff)))
    assert test["n"] == 3 and math.isclose(test["t_test_p"], 2 * stats.t.sf(abs(t), df=2))
    assert test["verdict"] == ("better" if test["t_test_p"] < 0.05 else "no significant difference")
    minilm_st = next(
        t
        for t in s["tests"]
        if t["claim"] == "enhanced dropout gradient"
        and t["task"] == "CoLA"
        and t["start"] == "minilm"
    )
    assert minilm_st["seeds"] == [1, 2] and minilm_st["verdict"].startswith("not tested")
    assert (
        "CoLA/minilm-st1-s3" in s["missing"]
        and len([m for m in s["missing"] if m.startswith("SST-2")]) == 18
    )
    text = markdown(s)
    assert text.startswith(
        "- pre-training train: 2,191 lines, 213,594 tokens (fairseq-preprocess, one </s> a "
        "line)\n- CoLA dev: read 516 examples, wrote 516 (label 0: 162, label 1: 354; 0 cut to "
        "62 pieces)\n"
    )
    assert (
        "| CoLA (MCC x 100) | MiniLM + continued pre-training, position mask 0.10 | ordinary |"
        in text
    )
    assert (
        "2.50 (1.56)" in text
        and "learning rate 1.5e-4 for every run, chosen on CoLA dev" in text
        and "Not finished yet (19 runs" in text
    )
    assert (
        "| probe-lr1e-3: position mask 0.1, lr 0.001 + --lr 1e-3 | 0.001 | no | 100 | 9.00 | "
        "1.50 (1.56) |" in text
    )
    assert s["pretrain"]["p0.10"]["fine_tuned"] and not s["pretrain"]["probe-lr1e-3"]["fine_tuned"]
    conv = {(c["task"], c["straight_through"], c["updates"]): c for c in s["convergence"]}
    at50 = conv[
        ("CoLA", False, 50)
    ]  # the logged curve is the final value - 5, so the same differences
    assert at50["seeds"] == SEEDS and math.isclose(at50["mean_difference"], statistics.fmean(diff))
    assert math.isclose(at50["t_test_p"], test["t_test_p"])
    assert "- CoLA, ordinary dropout, 50 updates: " in text
    summary = page_summary(s)
    p = f"{test['t_test_p']:.3f}"
    assert (
        f"CoLA ordinary dropout: {test['verdict']} ({statistics.fmean(diff):.2f} points, p = {p})"
        in summary
    )
    assert "CoLA MiniLM as converted: not tested (fewer than 3 paired seeds)" in summary
    assert (
        "3 fine-tuning seeds per row, 100 fine-tuning updates" in summary
        and "19 runs not finished yet" in summary
    )
    figures = plot(s, tmp_path)
    assert len(figures) == 2 and all(
        (tmp_path / f.split("/")[-1]).stat().st_size > 5000 for f in figures
    )


def test_driver_refuses_a_finished_pretraining_asked_for_with_other_settings(tmp_path):
    """glue_run.py resumes a finished run only when it was made with the settings asked for now."""
    from reproduction.position_masking.glue_run import Driver

    run = tmp_path / "pretrain" / "probe-lr1e-3"
    write(run / "result.json", {"lr": 1e-3, "updates": 400, "extra_options": ["--lr", "1e-3"]})
    driver = Driver.__new__(Driver)  # no data preparation: only the check before a run
    driver.a, driver.work = None, tmp_path
    driver.pretrain(
        "0.10", "2e-4", 400, "probe-lr1e-3", ["--lr", "1e-3"]
    )  # the same: nothing to do
    with pytest.raises(SystemExit, match="pre-trained with other settings"):
        driver.pretrain("0.10", "2e-4", 1000, "probe-lr1e-3", ["--lr", "1e-3"])

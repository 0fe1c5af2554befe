#!/usr/bin/env python
"""Collect reproduction/position_masking/minilm.sh into its results file and results-page block.

    python -m reproduction.position_masking.collect_minilm --work DIR --probs 0 0.10 --seeds 1 2 3
        [--seconds T0 T1 T2 T3] [--publish results/minilm.json] [--page
        docs/results/position-masking.md]

Per start (MiniLM as converted, and MiniLM after continued pre-training with each
--position-mask-prob): the continued pre-training's last validation (MLM and position
accuracy, from fairseq's log) and the word-order fine-tuning's last validation accuracy per
seed, their mean and standard deviation, and Welch's t-test (two-sided, over seeds) of each
continued start against MiniLM and of position masking against none.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path

from fairseq_ext.analysis.hardware import cpu_and_cores
from fairseq_ext.common.errors import FairseqExtError
from reproduction.results_page import write_between_markers

ROOT = Path(__file__).resolve().parents[2]
START, END = "<!-- table3-minilm:start -->", "<!-- table3-minilm:end -->"


def last_validation(log: Path) -> dict:
    """The fields of the last ``| valid |`` line of a fairseq log."""
    if not log.exists():
        raise SystemExit(
            f"error: {log} does not exist; run reproduction/position_masking/minilm.sh first"
        )
    lines = [line for line in log.read_text(errors="replace").splitlines() if "| valid |" in line]
    if not lines:
        raise SystemExit(f"error: {log} has no validation line; the run did not finish")
    return {k: float(v) for k, v in re.findall(r"\| ([A-Za-z_0-9]+) ([-0-9.e]+)", lines[-1])}


def welch(a: list, b: list) -> float | None:
    from scipy import stats

    if len(a) < 2 or len(b) < 2 or (statistics.pstdev(a) == 0 and statistics.pstdev(b) == 0):
        return None
    return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


def summarise(work: Path, probs: list, seeds: list) -> dict:
    starts = {"minilm": "all-MiniLM-L6-v2 as converted"}
    starts.update(
        {f"p{p}": f"MiniLM + continued pre-training, --position-mask-prob {p}" for p in probs}
    )
    rows = {}
    for name, label in starts.items():
        row = {"label": label}
        if name != "minilm":
            valid = last_validation(work / "pretrain" / name / "train.log")
            row["pretrain_valid"] = {
                k: valid.get(k) for k in ("mlm_accuracy", "position_accuracy", "loss")
            }
        accs = [
            last_validation(work / "finetune" / f"{name}-s{s}" / "train.log")["accuracy"]
            for s in seeds
        ]
        row.update(
            seeds=seeds,
            accuracy_per_seed=accs,
            accuracy_mean=statistics.fmean(accs),
            accuracy_std=statistics.stdev(accs) if len(accs) > 1 else 0.0,
        )
        rows[name] = row
    tests = []
    pairs = [(f"p{p}", "minilm") for p in probs] + [(f"p{p}", f"p{probs[0]}") for p in probs[1:]]
    for a, b in pairs:
        p_value = welch(rows[a]["accuracy_per_seed"], rows[b]["accuracy_per_seed"])
        delta = rows[a]["accuracy_mean"] - rows[b]["accuracy_mean"]
        verdict = (
            "no significant difference"
            if p_value is None or p_value >= 0.05
            else ("better" if delta > 0 else "worse")
        )
        tests.append(
            {
                "start": a,
                "against": b,
                "delta_accuracy": round(delta, 2),
                "p_value": None if p_value is None else round(p_value, 4),
                "verdict": verdict,
            }
        )
    return {
        "task": (
            "word order (data_prep/word_order.py, span 4) on WikiText-2, validation accuracy (%)"
        ),
        "significance": "Welch's t-test over fine-tuning seeds, two-sided, p < 0.05",
        "starts": rows,
        "tests": tests,
    }


def markdown(summary: dict) -> str:
    lines = [
        "| start | continued pre-training: valid MLM / position accuracy (%) | word-order "
        "accuracy (%), mean ± std | per seed |",
        "|---|---|---|---|",
    ]
    for row in summary["starts"].values():
        pre = row.get("pretrain_valid")
        pre_text = (
            "-"
            if not pre
            else " / ".join(
                "-" if pre.get(k) is None else f"{pre[k]:.2f}"
                for k in ("mlm_accuracy", "position_accuracy")
            )
        )
        seeds = ", ".join(f"{a:.1f}" for a in row["accuracy_per_seed"])
        lines.append(
            f"| {row['label']} | {pre_text} | {row['accuracy_mean']:.2f} ± "
            f"{row['accuracy_std']:.2f} | {seeds} |"
        )
    lines += ["", f"Significance ({summary['significance']}):", ""]
    for t in summary["tests"]:
        p = "n/a" if t["p_value"] is None else f"{t['p_value']:.3f}"
        lines.append(
            f"- {summary['starts'][t['start']]['label']} vs "
            f"{summary['starts'][t['against']]['label']}: {t['verdict']} "
            f"({t['delta_accuracy']:+.2f} points, p = {p})."
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--probs", nargs="+", required=True)
    p.add_argument("--seeds", nargs="+", type=int, required=True)
    p.add_argument(
        "--seconds",
        nargs=4,
        type=int,
        help="start, after data, after pre-training, after fine-tuning",
    )
    p.add_argument("--publish", type=Path, help="results file to write (e.g. results/minilm.json)")
    p.add_argument("--page", type=Path, help="Markdown page whose table3-minilm block is rewritten")
    a = p.parse_args(argv)
    summary = summarise(a.work, a.probs, a.seeds)
    commands = a.work / "commands.txt"
    summary["commands"] = (
        [line.replace(str(ROOT) + "/", "") for line in commands.read_text().splitlines()]
        if commands.exists()
        else []
    )
    if a.seconds:
        t = a.seconds
        summary["wall_seconds_this_call"] = {
            "data": t[1] - t[0],
            "pretrain": t[2] - t[1],
            "finetune": t[3] - t[2],
        }
    summary["hardware"] = cpu_and_cores()
    table = markdown(summary)
    (a.work / "minilm_results.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(table, end="")
    if a.publish:
        a.publish.parent.mkdir(parents=True, exist_ok=True)
        a.publish.write_text(json.dumps(summary, indent=2) + "\n")
    if a.page:
        try:
            write_between_markers(a.page, table, START, END)
        except FairseqExtError as e:
            raise SystemExit(f"error: {e}") from None


if __name__ == "__main__":
    main()

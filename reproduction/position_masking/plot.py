#!/usr/bin/env python
"""MLM accuracy and position accuracy against updates, one line per run, from fairseq's
training logs (``--log-format simple``), as in the paper's Figures 3, 5 and 7; with
``--finetune``, the downstream validation accuracy of each pre-training setting too.

    python reproduction/position_masking/plot.py --out DIR PROB=RUN [PROB=RUN ...] \
        [--finetune PROB=FT_RUN ...] [--finetune none=FT_RUN]

RUN is a run directory of pretrain.sh (its train.log and valid_clean.log are read) or a
log file; FT_RUN a save directory of finetune.sh (or its train.log) that started from the
PROB run's checkpoint, ``none`` for the model fine-tuned from a random initialisation.
Writes DIR/mlm_accuracy.png, DIR/position_accuracy.png (training curves as lines,
validations as markers), DIR/downstream_accuracy.png (with --finetune) and DIR/results.json
and DIR/results.md (the last validation of each run).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

TRAIN_INNER = re.compile(r"\| train_inner \| .*?((?:\w+=[^,\s]+,?\s*)+)$")
VALID = re.compile(r"\| valid \| .*valid on '[^']+' subset \| (.*)$")
METRICS = (
    "mlm_accuracy",
    "position_accuracy",
    "mlm_loss",
    "position_loss",
    "accuracy",
    "num_updates",
)


def _numbers(pairs: list[tuple[str, str]]) -> dict[str, float]:
    out = {}
    for key, value in pairs:
        if key in METRICS:
            out[key] = float(value)
    return out


def parse_log(path: Path) -> dict[str, list[dict[str, float]]]:
    """``{"train": [...], "valid": [...]}``: the metrics of each train_inner and valid line."""
    train, valid = [], []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        m = TRAIN_INNER.search(line)
        if m:
            train.append(_numbers(re.findall(r"(\w+)=([^,\s]+)", m.group(1))))
            continue
        m = VALID.search(line)
        if m:
            pairs = [
                tuple(part.strip().split(" ", 1))
                for part in m.group(1).split(" | ")
                if " " in part.strip()
            ]
            valid.append(_numbers(pairs))
    return {"train": train, "valid": valid}


def load_run(spec: str) -> tuple[str, dict]:
    """``(PROB, run)`` for ``PROB=RUN_DIR`` or ``PROB=LOG``."""
    label, _, where = spec.partition("=")
    if not where:
        raise SystemExit(f"error: run {spec!r} must be PROB=RUN_DIR or PROB=LOG")
    path = Path(where)
    log = path / "train.log" if path.is_dir() else path
    if not log.exists():
        raise SystemExit(f"error: {log} does not exist")
    run = parse_log(log)
    if not run["train"] and not run["valid"]:
        raise SystemExit(
            f"error: {log} has no train_inner or valid lines (is it a fairseq-train log "
            "written with --log-format simple?)"
        )
    clean = path / "valid_clean.log" if path.is_dir() else None
    run["valid_clean"] = parse_log(clean)["valid"] if clean is not None and clean.exists() else []
    return label, run


def _label(prob: str) -> str:
    if prob == "none":
        return "no pre-training"
    try:
        return f"position mask {float(prob) * 100:g}%"
    except ValueError:
        return prob


def plot(runs: dict[str, dict], metric: str, title: str, out: Path) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    drawn = False
    for i, (prob, run) in enumerate(runs.items()):
        color = f"C{i}"
        train = [r for r in run["train"] if metric in r and "num_updates" in r]
        valid = [r for r in run["valid"] if metric in r and "num_updates" in r]
        if train:
            ax.plot(
                [r["num_updates"] for r in train],
                [r[metric] for r in train],
                color=color,
                label=f"{_label(prob)} (train)",
            )
        if valid:
            ax.plot(
                [r["num_updates"] for r in valid],
                [r[metric] for r in valid],
                "o--",
                color=color,
                label=f"{_label(prob)} (valid)",
            )
        drawn |= bool(train or valid)
    if not drawn:
        plt.close(fig)
        return False
    ax.set_xlabel("updates")
    ax.set_ylabel(f"{metric.replace('_', ' ')} (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return True


def summarise(runs: dict[str, dict], finetuned: dict[str, dict] | None = None) -> list[dict]:
    """One row per pre-training run (and one for ``none`` when it was fine-tuned): the last
    validation of pre-training, and the last of its fine-tuning when there is one."""
    finetuned = finetuned or {}
    unknown = set(finetuned) - set(runs) - {"none"}
    if unknown:
        raise SystemExit(
            f"error: --finetune {sorted(unknown)} name no pre-training run (have {sorted(runs)})"
        )
    rows = []
    for prob in list(runs) + (["none"] if "none" in finetuned else []):
        run = runs.get(prob, {"valid": [], "valid_clean": []})
        last = run["valid"][-1] if run["valid"] else {}
        clean = run["valid_clean"][-1] if run["valid_clean"] else {}
        row = {
            "position_mask_prob": prob,
            "updates": last.get("num_updates"),
            "valid_mlm_accuracy": last.get("mlm_accuracy"),
            "valid_position_accuracy": last.get("position_accuracy"),
            "valid_mlm_accuracy_positions_intact": clean.get("mlm_accuracy"),
        }
        if finetuned:
            ft = (
                finetuned[prob]["valid"][-1]
                if prob in finetuned and finetuned[prob]["valid"]
                else {}
            )
            row["finetune_updates"] = ft.get("num_updates")
            row["downstream_valid_accuracy"] = ft.get("accuracy")
        rows.append(row)
    return rows


SWEEP_MARKERS = ("<!-- table3-sweep:start -->", "<!-- table3-sweep:end -->")


def markdown(rows: list[dict]) -> str:
    def show(v):
        return "n/a" if v is None else f"{v:g}"

    downstream = any("downstream_valid_accuracy" in r for r in rows)
    head = (
        "| --position-mask-prob | updates | valid MLM accuracy (%) | valid position accuracy (%) "
        "| valid MLM accuracy, positions intact (%) |"
    )
    rule = "|---|---|---|---|---|"
    if downstream:
        head += " fine-tuning updates | downstream valid accuracy (%) |"
        rule += "---|---|"
    lines = [head, rule]
    for r in rows:
        line = (
            f"| {r['position_mask_prob']} | {show(r['updates'])} | "
            f"{show(r['valid_mlm_accuracy'])} | {show(r['valid_position_accuracy'])} | "
            f"{show(r['valid_mlm_accuracy_positions_intact'])} |"
        )
        if downstream:
            line += (
                f" {show(r.get('finetune_updates'))} | {show(r.get('downstream_valid_accuracy'))} |"
            )
        lines.append(line)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", required=True, type=Path, help="output folder")
    p.add_argument(
        "--page",
        type=Path,
        help="a page whose table3-sweep block gets the table (docs/results/position-masking.md)",
    )
    p.add_argument("runs", nargs="+", help="PROB=RUN_DIR or PROB=LOG")
    p.add_argument(
        "--finetune",
        action="append",
        default=[],
        metavar="PROB=FT_RUN",
        help="a fine-tuning run of the PROB checkpoint (none=FT_RUN: from a random initialisation)",
    )
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    runs = dict(load_run(spec) for spec in args.runs)
    finetuned = dict(load_run(spec) for spec in args.finetune)
    written = []
    for metric, title, which in (
        ("mlm_accuracy", "MLM accuracy", runs),
        ("position_accuracy", "Position accuracy", runs),
        ("accuracy", "Downstream (word order) accuracy", finetuned),
    ):
        png = args.out / f"{'downstream_accuracy' if metric == 'accuracy' else metric}.png"
        if which and plot(which, metric, title, png):
            written.append(str(png))
    rows = summarise(runs, finetuned)
    (args.out / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    (args.out / "results.md").write_text(markdown(rows))
    if args.page:  # sweep.sh puts the repository on PYTHONPATH
        from reproduction.results_page import write_between_markers

        write_between_markers(args.page, markdown(rows), *SWEEP_MARKERS)
    sys.stdout.write(markdown(rows))
    print(
        "wrote "
        + ", ".join(written + [str(args.out / "results.json"), str(args.out / "results.md")])
    )


if __name__ == "__main__":
    main()

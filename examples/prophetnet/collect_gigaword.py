#!/usr/bin/env python
"""Collect the runs of compare_gigaword.sh into table 2 of the README: ROUGE-1/2/L F1 of every
run, its pre-training/fine-tuning updates and wall time, a bar chart, and (``--publish DIR``)
copies of results.json, results.md and the chart that the README cites.

    python examples/prophetnet/collect_gigaword.py --work DIR --scale cpu [--publish DIR]

Reads DIR/runs/NAME/results.json (written by gigaword.sh and unilm/gigaword.sh).
"""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

LABELS = {
    "p1": "ProphetNet n=1 (next token only)", "p2": "ProphetNet n=2", "p3": "ProphetNet n=3",
    "p1-pt": "ProphetNet n=1 + span pre-training", "p2-pt": "ProphetNet n=2 + span pre-training",
    "p3-pt": "ProphetNet n=3 + span pre-training", "transformer": "Transformer (same sizes)",
    "unilm": "UniLM prefix mask (6 x 256)",
}


def collect(work: Path, scale: str) -> dict:
    """The summary of every finished run under ``work/runs``, in LABELS order."""
    runs = {}
    for name, label in LABELS.items():
        path = work / "runs" / name / "results.json"
        if not path.exists():
            continue
        r = json.loads(path.read_text())
        wall = r.get("wall_seconds", {})
        runs[name] = {"label": label, "rouge1": r["rouge1_f1"], "rouge2": r["rouge2_f1"], "rougeL": r["rougeL_f1"],
                      "sentences": r["sentences"], "pretrain_updates": r.get("pretrain_updates", 0),
                      "finetune_updates": r.get("finetune_updates", r.get("updates")),
                      "wall_seconds": wall.get("total") if isinstance(wall, dict) else wall,
                      "hardware": r.get("hardware"), "commands": r.get("commands")}
    if not runs:
        raise SystemExit(f"error: no run under {work / 'runs'} has a results.json")
    walls = [r["wall_seconds"] for r in runs.values() if r["wall_seconds"] is not None]
    return {"scale": scale, "scorer": "rouge-score (stemmed), F1 x 100, 1000 Gigaword validation pairs",
            "decoding": "beam 4, lenpen 1.0, no-repeat-ngram 3, max length 40",
            "wall_seconds_all_runs": sum(walls), "runs": runs}


def markdown(summary: dict) -> str:
    lines = ["| model | pre-training updates | fine-tuning updates | ROUGE-1 | ROUGE-2 | ROUGE-L | wall time (s) |",
             "|---|---|---|---|---|---|---|"]
    for r in summary["runs"].values():
        lines.append(f"| {r['label']} | {r['pretrain_updates']} | {r['finetune_updates']} | {r['rouge1']:.2f} "
                     f"| {r['rouge2']:.2f} | {r['rougeL']:.2f} | {r['wall_seconds']} |")
    return "\n".join(lines) + "\n"


def plot(summary: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = list(summary["runs"].values())
    fig, ax = plt.subplots(figsize=(8, 4.2))
    width = 0.27
    for i, (metric, name) in enumerate((("rouge1", "ROUGE-1"), ("rouge2", "ROUGE-2"), ("rougeL", "ROUGE-L"))):
        ax.bar([j + width * i for j in range(len(runs))], [r[metric] for r in runs], width=width, label=name)
    ax.set_xticks([j + width for j in range(len(runs))], [r["label"] for r in runs], rotation=30, ha="right",
                  fontsize=7)
    updates = sorted({r["finetune_updates"] for r in runs})
    ax.set(ylabel="F1 x 100", title=f"Gigaword valid (1000 pairs), {summary['scale']} scale, "
                                     f"{'/'.join(map(str, updates))} fine-tuning updates")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", required=True, type=Path)
    p.add_argument("--scale", required=True)
    p.add_argument("--publish", type=Path, help="folder that gets results.json, results.md and figures/")
    args = p.parse_args(argv)
    summary = collect(args.work, args.scale)
    (args.work / "results.json").write_text(json.dumps(summary, indent=2) + "\n")
    (args.work / "results.md").write_text(markdown(summary))
    plot(summary, args.work / "rouge.png")
    print(markdown(summary), end="")
    if args.publish:
        (args.publish / "figures").mkdir(parents=True, exist_ok=True)
        shutil.copy(args.work / "results.json", args.publish / "results.json")
        shutil.copy(args.work / "results.md", args.publish / "results.md")
        shutil.copy(args.work / "rouge.png", args.publish / "figures" / "gigaword_rouge.png")
        print(f"published to {args.publish}")


if __name__ == "__main__":
    main()

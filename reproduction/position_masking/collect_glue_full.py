"""The full-budget GLUE table (``glue_full.py``'s kept runs) as a results file and the
``table3-glue-full`` block of docs/results/position-masking.md: per task the learning-rate
grid, each dropout arm's dev score over its seeds (mean, standard deviation), the
straight-through arm against ordinary dropout paired by seed (Wagner et al. 2020, section 2.2),
the majority-class bar, and the published MiniLM-class rows; with ``--publish`` also the
page's ``table3-glue-full-summary`` lines (each arm, the gap to the published MiniLM row, the
verdict on the enhanced dropout gradient).

    python -m reproduction.position_masking.collect_glue_full [--publish]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from reproduction.position_masking.collect_glue import curve_mean, paired
from reproduction.position_masking.glue_full import LRS, RESULTS
from reproduction.position_masking.glue_run import ROOT, TASKS
from reproduction.results_page import write_between_markers

PAGE = ROOT / "docs" / "results" / "position-masking.md"
SUMMARY = ROOT / "reproduction" / "position_masking" / "results" / "glue_full.json"
START, END = "<!-- table3-glue-full:start -->", "<!-- table3-glue-full:end -->"
SUMMARY_MARKERS = (
    "<!-- table3-glue-full-summary:start -->",
    "<!-- table3-glue-full-summary:end -->",
)  # on PAGE
SEEDS = (1, 2, 3, 4, 5)
MINILM_README = "microsoft/unilm, minilm/README.md (dev)"
PUBLISHED = [  # GLUE dev: CoLA Matthews correlation x 100, SST-2 accuracy
    {"row": "MiniLM-L6xH384 (22M)", "CoLA": 47.5, "SST-2": 91.5, "source": MINILM_README},
    {"row": "BERT-Base (109M)", "CoLA": 58.9, "SST-2": 93.2, "source": MINILM_README},
]


def majority(gold: list[str], task: str) -> float:
    """The dev score of always predicting the most frequent dev label: MCC 0, or its share."""
    if task == "CoLA":
        return 0.0
    return 100.0 * max(gold.count(label) for label in set(gold)) / len(gold)


def spread(values: list[float]) -> dict:
    return {
        "n": len(values),
        "mean": statistics.fmean(values) if values else None,
        "sd": statistics.stdev(values) if len(values) > 1 else None,
    }


def summarise(results: Path, gold: dict[str, list[str]]) -> dict:
    """The table from the kept runs; ``gold``: each task's dev labels (for the majority class)."""
    tasks = {}
    for task in TASKS:
        runs = {
            p.stem: json.loads(p.read_text(encoding="utf-8"))
            for p in sorted((results / task).glob("*.json"))
        }
        if not runs:
            continue
        grid = {
            f"{r['lr']:g}": r["dev"]
            for name, r in sorted(runs.items(), key=lambda kv: kv[1]["lr"])
            if name.startswith("lr")
        }
        arms = {
            st: {r["seed"]: r["dev"] for name, r in runs.items() if name.startswith(f"st{st}-")}
            for st in (0, 1)
        }
        row = {
            "grid": grid,
            "updates": sorted({r["updates"] for r in runs.values()}),
            "trained_updates": sorted(
                {int(r["validations"][-1]["num_updates"]) for r in runs.values()}
            ),
            "epochs": sorted({r["epochs"] for r in runs.values()}),
            "lr": sorted({r["lr"] for name, r in runs.items() if name.startswith("st")}),
            "chosen_lr": max(grid, key=grid.get) if len(grid) == len(LRS) else None,
            "ordinary": spread(list(arms[0].values())),
            "straight_through": spread(list(arms[1].values())),
            "test": paired(arms[0], arms[1]),
            "missing": [f"st{st}-s{s}" for s in SEEDS for st in (0, 1) if s not in arms[st]],
            "curves": {
                name: [
                    (v.get("num_updates"), v.get("mcc" if task == "CoLA" else "accuracy"))
                    for v in r["validations"]
                ]
                for name, r in runs.items()
            },
            "wall_seconds": round(sum(r["wall_seconds"] for r in runs.values())),
            "hardware": sorted({r["hardware"] for r in runs.values()}),
        }
        row["majority"] = majority(gold[task], task)
        tasks[task] = row
    return {
        "tasks": tasks,
        "published": PUBLISHED,
        "driver": "python -m reproduction.position_masking.glue_full "
        "--glue GLUE --plugin-root SNAPSHOT",
    }


def _fmt(x: float | None, digits: int = 2) -> str:
    return "" if x is None else f"{x:.{digits}f}"


def _arm(s: dict) -> str:
    if not s["n"]:
        return "not run yet"
    return (
        f"{_fmt(s['mean'])} ± {_fmt(s['sd'])} ({s['n']} seeds)"
        if s["n"] > 1
        else f"{_fmt(s['mean'])} (1 seed)"
    )


def markdown(summary: dict) -> str:
    lines = [
        "| task (metric) | budget | grid (seed 0): lr -> dev | ordinary dropout | "
        "straight-through | straight-through - ordinary, paired by seed | majority class | "
        "published (dev) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for task in TASKS:
        row = summary["tasks"].get(task)
        published = "; ".join(f"{p['row']} {p[task]}" for p in summary["published"])
        metric = "MCC x 100" if task == "CoLA" else "accuracy"
        if row is None:
            lines.append(f"| {task} ({metric}) | not run yet | | | | | | {published} |")
            continue
        t = row["test"]
        p_value = (
            "" if t["t_test_p"] is None or t["n"] < 3 else f", t-test p = {_fmt(t['t_test_p'], 3)}"
        )
        test = (
            f"{_fmt(t['mean_difference'])} points over {t['n']} paired "
            f"seed{'s' if t['n'] != 1 else ''}{p_value}: {t['verdict']}"
            if t["n"]
            else "not run yet"
        )
        grid = ", ".join(f"{lr}: {_fmt(v)}" for lr, v in row["grid"].items())
        epochs = "/".join(f"{e:g}" for e in row["epochs"])
        chosen = (
            f"lr {row['chosen_lr']} (the grid's best)"
            if row["chosen_lr"]
            else f"lr not chosen yet ({len(row['grid'])} of the grid's {len(LRS)} runs done)"
        )
        trained, scheduled = (
            "/".join(map(str, row["trained_updates"])),
            "/".join(map(str, row["updates"])),
        )
        budget = (
            f"{epochs} epoch{'' if epochs == '1' else 's'}, {trained} updates of 32"
            + ("" if trained == scheduled else f" ({scheduled} scheduled)")
            + f", {chosen}"
        )
        lines.append(
            f"| {task} ({metric}) | {budget} | {grid} | {_arm(row['ordinary'])} | "
            f"{_arm(row['straight_through'])} | {test} | {_fmt(row['majority'])} | {published} |"
        )
    lines.append("")
    for task, row in summary["tasks"].items():
        means = [
            s["mean"] for s in (row["ordinary"], row["straight_through"]) if s["mean"] is not None
        ]
        above = bool(means) and min(means) > row["majority"]
        if not means:
            verdict = "no seed of either arm has finished yet"
        elif above:
            verdict = "both arms are above the majority class, so the comparison counts"
        else:
            verdict = (
                "not every arm is above the majority class yet, so this comparison decides nothing"
            )
        lines.append(
            f"- {task}: "
            + verdict
            + (
                f"; {len(row['missing'])} runs not finished yet: {', '.join(row['missing'])}"
                if row["missing"]
                else ""
            )
            + f" ({row['wall_seconds']} s of runs; {'; '.join(row['hardware'])})."
        )
    for task, row in summary["tasks"].items():
        if (curve := seed_curve(row["curves"], task)) is not None:
            lines.append(curve)
    lines.append(
        f"- Published rows: {MINILM_README}. all-MiniLM-L6-v2 is sentence-transformers' "
        "sentence-embedding model, trained contrastively from MiniLM-L6-H384, not the published "
        "MiniLM checkpoint."
    )
    return "\n".join(lines) + "\n"


def seed_curve(curves: dict, task: str) -> str | None:
    """Whether the budget ended on a plateau, as numbers: the dev curve of both arms' runs (every
    seed, mean at each validation) and how far each run's last validation is from its best."""
    runs = {
        name: [v for _, v in c if v is not None]
        for name, c in curves.items()
        if name.startswith("st")
    }
    runs = {name: values for name, values in runs.items() if values}
    if not runs:
        return None
    xs, ys = curve_mean({name: curves[name] for name in runs})
    below = [max(values) - values[-1] for values in runs.values()]
    return (
        f"- {task} dev curve, mean of the {len(runs)} seed runs of both arms at each validation "
        "(update: score): "
        + ", ".join(f"{x:.0f}: {y:.1f}" for x, y in zip(xs, ys))
        + (
            f"; each run's last validation is {statistics.fmean(below):.2f} points below its "
            "best on average."
        )
    )


def page_summary(summary: dict) -> str:
    """The page's summary lines on the full-budget table: each task's two arms, the gap to the
    published MiniLM row, and what the paired test decides for the enhanced dropout gradient."""
    minilm = next(p for p in summary["published"] if p["row"].startswith("MiniLM"))
    lines = [
        "GLUE dev at the published fine-tuning budget (BERT's recipe, from all-MiniLM-L6-v2, "
        "chosen learning rate, paired t-test by seed; the full-budget table below):",
        "",
    ]
    for task in TASKS:
        row = summary["tasks"].get(task)
        if row is None or not (row["ordinary"]["n"] or row["grid"]):
            lines.append(f"- {task}: not run yet.")
            continue
        if not row["ordinary"]["n"]:
            best = max(row["grid"].values())
            lines.append(
                f"- {task}: learning-rate grid {len(row['grid'])} of {len(LRS)} runs ("
                + ", ".join(f"lr {lr}: {_fmt(v)}" for lr, v in row["grid"].items())
                + f"; {_fmt(minilm[task] - best, 1)} points below the published {minilm['row']} "
                f"({minilm[task]})); the two arms' {len(row['missing'])} runs still to run."
            )
            continue
        o, st, t = row["ordinary"], row["straight_through"], row["test"]
        counts = f"{o['n']}" if o["n"] == st["n"] else f"{o['n']} and {st['n']}"
        above = min(o["mean"], st["mean"] if st["n"] else o["mean"]) > row["majority"]
        p_value = "" if t["t_test_p"] is None or t["n"] < 3 else f", p = {_fmt(t['t_test_p'], 3)}"
        lines.append(
            f"- {task}: ordinary dropout {_fmt(o['mean'])}, straight-through {_fmt(st['mean'])} "
            f"({counts} seed{'' if counts == '1' else 's'}), {'above' if above else 'not above'} "
            f"the majority class ({_fmt(row['majority'])}) and "
            f"{_fmt(minilm[task] - max(o['mean'], st['mean'] if st['n'] else o['mean']), 1)} "
            f"points below the published {minilm['row']} ({minilm[task]}); the enhanced dropout "
            f"gradient: {_fmt(t['mean_difference'])} points{p_value}, {t['verdict']}"
            + ("" if above else " (the comparison counts only above the majority class)")
            + (f"; {len(row['missing'])} runs still to run." if row["missing"] else ".")
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m reproduction.position_masking.collect_glue_full",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--results", type=Path, default=RESULTS, help="glue_full.py's kept runs")
    p.add_argument(
        "--gold",
        type=Path,
        default=ROOT / "work" / "glue_full" / "data",
        help="glue_full.py's data folder (TASK/raw/valid.label: the dev labels)",
    )
    p.add_argument(
        "--publish", action="store_true", help="write the results file and the page's block"
    )
    a = p.parse_args(argv)
    gold = {}
    for task in TASKS:
        labels = a.gold / task / "raw" / "valid.label"
        if (a.results / task).is_dir():
            if not labels.is_file():
                p.error(f"{labels} does not exist: give --gold, glue_full.py's data folder")
            gold[task] = labels.read_text(encoding="utf-8").split()
    summary = summarise(a.results, gold)
    block = markdown(summary)
    print(block)
    if a.publish:
        SUMMARY.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
        write_between_markers(PAGE, block, START, END)
        write_between_markers(PAGE, page_summary(summary), *SUMMARY_MARKERS)


if __name__ == "__main__":
    main()

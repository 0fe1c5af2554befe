"""Collect the GLUE runs of ``glue_run.py`` into Table 3's results file, figures and page block:
Wagner et al. 2020 ("Positional Masking for Language Models"), section 5.1 (position masking
improves fine-tuning, 10% best, about 10% faster convergence) and section 5.2 (the enhanced
dropout gradient gives consistently better fine-tuning), judged on CoLA (Matthews
correlation) and SST-2 (accuracy) dev scores of the fine-tuned models' predictions.

    python -m reproduction.position_masking.collect_glue --work work/glue [--publish] [--probs 0
    0.10]
        [--seeds 1 2 3 4 5]

Per row (task, start, dropout): mean ± sample standard deviation over fine-tuning seeds and
the score of each fine-tuning run. Claims are tested by seed-paired comparisons
(``scipy.stats.ttest_rel``, two-sided, and the Wilcoxon signed-rank test): 0.10 against 0 position
masking for each task and dropout, and straight-through against ordinary attention dropout for each
task and start. A difference is called established only at p < 0.05 in the paired t-test. Runs that
are missing (the driver resumes them) are listed, and tests pair only seeds present in both rows.
``--publish`` writes ``results/glue.json``, every run's dev predictions
(``results/glue_predictions/TASK/RUN.txt``, one predicted label a line), the figures
``results/glue_*.png``, the ``table3-glue`` block of ``docs/results/position-masking.md`` and its
``table3-glue-summary`` block (each claim's verdicts with their p-values).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
from pathlib import Path

from scipy import stats

from reproduction.results_page import write_between_markers

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PAGE = ROOT / "docs" / "results" / "position-masking.md"
TASKS = ("CoLA", "SST-2")
METRIC_NAMES = {"CoLA": "MCC x 100", "SST-2": "accuracy (%)"}
CURVE_FIELD = {"CoLA": "mcc", "SST-2": "accuracy"}
ALPHA = 0.05


def start_label(start: str) -> str:
    if start == "minilm":
        return "MiniLM as converted"
    return f"MiniLM + continued pre-training, position mask {start[1:]}"


def read_json(path: Path) -> dict | None:
    """A run's result.json; a --user-dir outside the repository (the driver's --plugin-root
    snapshot) is written ``SNAPSHOT/fairseq_ext``, so the results file holds no machine path."""
    if not path.is_file():
        return None
    result = json.loads(path.read_text(encoding="utf-8"))
    if "command" in result:
        result["command"] = [
            "SNAPSHOT/fairseq_ext" if c.startswith("/") and c.endswith("/fairseq_ext") else c
            for c in result["command"]
        ]
    return result


def paired(a: dict[int, float], b: dict[int, float]) -> dict:
    """Seed-paired comparison of b against a: mean difference, ttest_rel and wilcoxon p."""
    seeds = sorted(set(a) & set(b))
    diff = [b[s] - a[s] for s in seeds]
    out = {
        "seeds": seeds,
        "n": len(seeds),
        "mean_difference": statistics.fmean(diff) if diff else None,
        "t_test_p": None,
        "wilcoxon_p": None,
    }
    if len(seeds) >= 2 and any(d != diff[0] for d in diff):
        out["t_test_p"] = float(
            stats.ttest_rel([b[s] for s in seeds], [a[s] for s in seeds]).pvalue
        )
    if len(seeds) >= 2 and any(d != 0 for d in diff):
        out["wilcoxon_p"] = float(stats.wilcoxon(diff).pvalue)
    p = out["t_test_p"]
    if len(seeds) < 3:
        out["verdict"] = "not tested (fewer than 3 paired seeds)"
    elif p is None:  # every seed differs by the same amount: no spread to test against
        out["verdict"] = (
            "identical scores"
            if diff[0] == 0
            else f"the same difference at every seed ({diff[0]:+.2f}), untestable"
        )
    elif p < ALPHA:
        out["verdict"] = "better" if out["mean_difference"] > 0 else "worse"
    else:
        out["verdict"] = "no significant difference"
    return out


def data_counts(work: Path) -> list[str]:
    """What the driver's data steps logged: fairseq-preprocess's sentence and token counts of
    the pre-training text, and data_prep/glue.py's examples read and written per split."""
    lines = []
    log = work / "preprocess.log"
    if log.is_file():
        for m in re.finditer(
            r"\] \S*/(\w+)\.txt: (\d+) sents, (\d+) tokens", log.read_text(encoding="utf-8")
        ):
            lines.append(
                f"pre-training {m.group(1)}: {int(m.group(2)):,} lines, {int(m.group(3)):,} tokens "
                "(fairseq-preprocess, one </s> a line)"
            )
    for task in TASKS:
        log = work / f"glue-{task}.log"
        if log.is_file():
            for m in re.finditer(
                r"glue: \S*/(\w+)\.tsv: (read .*?) to \S+ (\(.*\))", log.read_text(encoding="utf-8")
            ):
                lines.append(f"{task} {m.group(1)}: {m.group(2)} {m.group(3)}")
    return lines


def summarise(work: Path, probs: list[str], seeds: list[int]) -> dict:
    starts = ["minilm"] + [f"p{p}" for p in probs]
    pretrain = {}
    for path in sorted((work / "pretrain").glob("*/result.json")):
        r = read_json(path)
        lr = r.get("lr", float(r["command"][r["command"].index("--lr") + 1]))
        pretrain[path.parent.name] = {
            "probability": r["probability"],
            "lr": lr,
            "updates": r.get("updates"),
            "extra_options": r.get("extra_options", []),
            "command": r["command"],
            "wall_seconds": r["wall_seconds"],
            "hardware": r["hardware"],
            "chance_position_accuracy": r["chance_position_accuracy"],
            "fine_tuned": path.parent.name in starts,
            "curve": [
                {
                    "updates": int(v["num_updates"]),
                    "mlm_accuracy": v.get("mlm_accuracy"),
                    "position_accuracy": v.get("position_accuracy"),
                }
                for v in r["validations"]
            ],
        }
    selection = read_json(work / "select" / "chosen.json")
    selection_runs = {}
    for path in sorted((work / "select").glob("*/lr*/result.json")):
        selection_runs.setdefault(path.parent.parent.name, {})[path.parent.name[2:]] = read_json(
            path
        )["dev"]
    rows, missing, commands, wall, gaps = [], [], {}, 0.0, []
    for task in TASKS:
        for start in starts:
            for st in (False, True):
                per_seed, curves = {}, {}
                for seed in seeds:
                    name = f"{start}-st{int(st)}-s{seed}"
                    r = read_json(work / "finetune" / task / name / "result.json")
                    if r is None:
                        missing.append(f"{task}/{name}")
                        continue
                    per_seed[seed] = r["dev"]
                    logged = (
                        r["validations"][-1].get(CURVE_FIELD[task]) if r["validations"] else None
                    )
                    if logged is not None:
                        gaps.append(abs(r["dev"] - logged))
                    curves[seed] = [
                        (int(v["num_updates"]), v.get(CURVE_FIELD[task])) for v in r["validations"]
                    ]
                    commands[f"{task}/{name}"] = {
                        "command": r["command"],
                        "wall_seconds": r["wall_seconds"],
                        "hardware": r["hardware"],
                        "predictions": r["predictions"],
                        "lr": r["lr"],
                        "updates": r["updates"],
                    }
                    wall += r["wall_seconds"]
                values = [per_seed[s] for s in sorted(per_seed)]
                rows.append(
                    {
                        "task": task,
                        "start": start,
                        "straight_through": st,
                        "seeds": sorted(per_seed),
                        "dev_per_seed": values,
                        "mean": statistics.fmean(values) if values else None,
                        "std": statistics.stdev(values) if len(values) >= 2 else None,
                        "curves": {str(s): c for s, c in sorted(curves.items())},
                    }
                )

    def row(task, start, st):
        r = next(
            x
            for x in rows
            if x["task"] == task and x["start"] == start and x["straight_through"] == st
        )
        return dict(zip(r["seeds"], r["dev_per_seed"]))

    tests = []
    for task in TASKS:
        for p in probs[1:]:
            for st in (False, True):
                tests.append(
                    {
                        "claim": "position masking",
                        "task": task,
                        "straight_through": st,
                        "a": f"p{probs[0]}",
                        "b": f"p{p}",
                        **paired(row(task, f"p{probs[0]}", st), row(task, f"p{p}", st)),
                    }
                )
        for start in starts:
            tests.append(
                {
                    "claim": "enhanced dropout gradient",
                    "task": task,
                    "start": start,
                    "a": "ordinary dropout",
                    "b": "straight-through",
                    **paired(row(task, start, False), row(task, start, True)),
                }
            )
    convergence = []  # section 5.1's "faster convergence": the same test at every validation
    for task in TASKS:
        for p in probs[1:]:
            for st in (False, True):
                a_row, b_row = (
                    next(
                        x
                        for x in rows
                        if x["task"] == task and x["start"] == start and x["straight_through"] == st
                    )
                    for start in (f"p{probs[0]}", f"p{p}")
                )
                updates = sorted({u for c in a_row["curves"].values() for u, _ in c})
                for u in updates:

                    def at(r):
                        return {
                            int(seed): v
                            for seed, c in r["curves"].items()
                            for x, v in c
                            if x == u and v is not None
                        }

                    convergence.append(
                        {
                            "task": task,
                            "straight_through": st,
                            "a": f"p{probs[0]}",
                            "b": f"p{p}",
                            "updates": u,
                            **paired(at(a_row), at(b_row)),
                        }
                    )
    return {
        "data": data_counts(work),
        "pretrain": pretrain,
        "selection": selection,
        "convergence": convergence,
        "selection_runs": selection_runs,
        "rows": rows,
        "tests": tests,
        "missing": missing,
        "commands": commands,
        "finetune_wall_seconds": round(wall, 1),
        "largest_gap_to_fairseq_logged_metric": max(gaps) if gaps else None,
    }


def curve_mean(curves: dict) -> tuple[list[int], list[float]]:
    by_update: dict[int, list[float]] = {}
    for c in curves.values():
        for u, v in c:
            if v is not None:
                by_update.setdefault(u, []).append(v)
    xs = sorted(by_update)
    return xs, [statistics.fmean(by_update[x]) for x in xs]


def plot(summary: dict, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, task in zip(axes, TASKS):
        for r in summary["rows"]:
            if r["task"] != task or r["start"] == "minilm" or not r["curves"]:
                continue
            xs, ys = curve_mean(r["curves"])
            ax.plot(
                xs,
                ys,
                marker="o",
                linestyle="-" if not r["straight_through"] else "--",
                label=f"{r['start']}{' straight-through' if r['straight_through'] else ''} "
                f"(n={len(r['seeds'])})",
            )
        ax.set_title(
            f"{task} dev {METRIC_NAMES[task]}\n(fairseq's validation, mean over seeds)", fontsize=10
        )
        ax.set_xlabel("fine-tuning updates")
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = out / "glue_finetune_curves.png"
    fig.savefig(path, dpi=100)
    written.append(path)
    plt.close(fig)
    if summary["pretrain"]:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 5.5))
        for i, (start, pre) in enumerate(summary["pretrain"].items()):
            xs = [c["updates"] for c in pre["curve"]]
            style = dict(
                marker="o",
                linestyle="--" if start.startswith("probe-") else "-",
                color=f"C{i}",
                label=pretrain_label(start, pre),
            )
            a1.plot(xs, [c["mlm_accuracy"] for c in pre["curve"]], **style)
            if any(c["position_accuracy"] is not None for c in pre["curve"]):
                a2.plot(
                    xs, [c["position_accuracy"] for c in pre["curve"]], **{**style, "label": None}
                )
            chance = pre["chance_position_accuracy"]
        a2.axhline(chance, color="grey", linestyle=":", label=f"chance ({chance:.2f}%)")
        a1.set_title("continued pre-training: valid MLM accuracy (%)")
        a2.set_title("valid position accuracy (%) (dashed: probes)")
        for ax in (a1, a2):
            ax.set_xlabel("pre-training updates")
        a2.legend(fontsize=8)
        fig.legend(loc="lower center", ncol=2, fontsize=7)
        fig.tight_layout(rect=(0, 0.17, 1, 1))
        path = out / "glue_pretrain_position_accuracy.png"
        fig.savefig(path, dpi=100)
        written.append(path)
        plt.close(fig)
    return [
        str(p.relative_to(ROOT)) if p.resolve().is_relative_to(ROOT) else str(p) for p in written
    ]


def pretrain_label(name: str, pre: dict) -> str:
    """``p0.10: position mask 0.1, lr 0.0002`` or ``probe-lr1e-3: ... + --lr 1e-3``."""
    extra = f" + {' '.join(pre['extra_options'])}" if pre["extra_options"] else ""
    return f"{name}: position mask {pre['probability']:g}, lr {pre['lr']:g}{extra}"


def fmt(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def p_value(p: float | None, test: str = "") -> str:
    """``, TEST p = 0.123``; nothing where the test could not run (its verdict says why)."""
    return "" if p is None else f", {test + ' ' if test else ''}p = {p:.3f}"


def markdown(summary: dict) -> str:
    lines = [f"- {line}" for line in summary.get("data", [])]
    if lines:
        lines.append("")
    if summary["pretrain"]:
        lines += [
            "| continued pre-training (probe-: diagnosis only) | lr | fine-tuned from | updates "
            "| valid MLM accuracy (%) | valid position accuracy (%) (chance) | position "
            "accuracy at each validation |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, pre in summary["pretrain"].items():
            last = pre["curve"][-1] if pre["curve"] else {}
            curve = (
                ", ".join(
                    f"{c['updates']}: {fmt(c['position_accuracy'])}"
                    for c in pre["curve"]
                    if c["position_accuracy"] is not None
                )
                or "-"
            )
            lines.append(
                f"| {pretrain_label(name, pre)} | {pre['lr']:g} | "
                f"{'yes' if pre['fine_tuned'] else 'no'} | {last.get('updates', '-')} | "
                f"{fmt(last.get('mlm_accuracy'))} | {fmt(last.get('position_accuracy'))} "
                f"({pre['chance_position_accuracy']:.2f}) | {curve} |"
            )
        lines.append("")
    sel = summary["selection"]
    if sel:
        lines.append(
            f"Fine-tuning learning rate {sel['chosen']} for every run, chosen on {sel['task']} dev "
            f"({METRIC_NAMES[sel['task']]} of MiniLM as converted, fine-tuning seed 0: "
            + ", ".join(f"lr {k}: {v:.2f}" for k, v in sel["scores"].items())
            + ")."
        )
    for task, runs in summary["selection_runs"].items():
        if not sel or task != sel["task"]:
            lines.append(
                f"Also tried on {task} dev ({METRIC_NAMES[task]}, same setting): "
                + ", ".join(f"lr {k}: {v:.2f}" for k, v in runs.items())
                + "."
            )
    lines += [
        "",
        "| task | start | attention dropout | dev metric, mean ± std | per seed | seeds |",
        "|---|---|---|---|---|---|",
    ]
    for r in summary["rows"]:
        spread = "" if r["std"] is None else f" ± {r['std']:.2f}"
        lines.append(
            f"| {r['task']} ({METRIC_NAMES[r['task']]}) | {start_label(r['start'])} | "
            f"{'straight-through' if r['straight_through'] else 'ordinary'} | "
            f"{fmt(r['mean'])}{spread} | "
            f"{', '.join(f'{v:.2f}' for v in r['dev_per_seed']) or '-'} | {len(r['seeds'])} |"
        )
    lines += [
        "",
        "Paired tests (by fine-tuning seed; t-test two-sided, Wilcoxon signed-rank; established "
        "at t-test p < 0.05):",
        "",
    ]
    for t in summary["tests"]:
        where = (
            f"{'straight-through' if t['straight_through'] else 'ordinary'} dropout"
            if t["claim"] == "position masking"
            else start_label(t["start"])
        )
        what = (
            f"position mask {t['b'][1:]} vs {t['a'][1:]}"
            if t["claim"] == "position masking"
            else "straight-through vs ordinary dropout"
        )
        lines.append(
            f"- {t['task']}, {where}: {what}: {t['verdict']} ({fmt(t['mean_difference'])} "
            "points, n = "
            f"{t['n']}{p_value(t['t_test_p'], 't-test')}{p_value(t['wilcoxon_p'], 'Wilcoxon')})."
        )
    if summary.get("convergence"):
        lines += [
            "",
            "Convergence (fairseq's logged dev metric at each validation, position mask "
            "0.10 vs 0, paired by seed):",
            "",
        ]
        for c in summary["convergence"]:
            lines.append(
                f"- {c['task']}, {'straight-through' if c['straight_through'] else 'ordinary'} "
                f"dropout, {c['updates']} updates: {c['verdict']} ({fmt(c['mean_difference'])} "
                f"points, n = {c['n']}{p_value(c['t_test_p'], 't-test')})."
            )
    if summary["largest_gap_to_fairseq_logged_metric"] is not None:
        lines += [
            "",
            "Scores are computed by scikit-learn from each model's dev predictions; they differ "
            "from the metric fairseq logged at its last validation by at most "
            f"{summary['largest_gap_to_fairseq_logged_metric']:.2f} points (fairseq rounds to "
            "0.1).",
        ]
    if summary["missing"]:
        lines += [
            "",
            f"Not finished yet ({len(summary['missing'])} runs; rerun the driver to resume): "
            + ", ".join(summary["missing"])
            + ".",
        ]
    return "\n".join(lines) + "\n"


def page_summary(summary: dict) -> str:
    """The page's summary lines on Table 3: each claim's verdict per task, with the paired t-test's
    p."""

    def verdicts(claim: str, label) -> str:
        parts = []
        for t in summary["tests"]:
            if t["claim"] != claim:
                continue
            parts.append(
                f"{t['task']} {label(t)}: {t['verdict']} ({fmt(t['mean_difference'])} points"
                f"{p_value(t['t_test_p'])})"
            )
        return "; ".join(parts)

    seeds = sorted({s for r in summary["rows"] for s in r["seeds"]})
    updates = sorted({c["updates"] for c in summary["commands"].values()})
    lines = [
        f"Position masking on GLUE dev from all-MiniLM-L6-v2 ({len(seeds)} fine-tuning seeds per "
        f"row, {'/'.join(map(str, updates))} fine-tuning updates, paired t-test by seed; the "
        "tables below):",
        "",
        "- position mask 0.10 vs 0 in continued pre-training: "
        + verdicts(
            "position masking",
            lambda t: "straight-through" if t["straight_through"] else "ordinary dropout",
        )
        + ";",
        "- straight-through vs ordinary attention dropout: "
        + verdicts("enhanced dropout gradient", lambda t: start_label(t["start"]))
        + ".",
    ]
    if summary["missing"]:
        lines.append(f"- {len(summary['missing'])} runs not finished yet.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--work", type=Path, default=ROOT / "work" / "glue")
    p.add_argument("--probs", nargs="+", default=["0", "0.10"])
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    p.add_argument("--publish", action="store_true")
    p.add_argument("--out", type=Path, default=HERE / "results")
    a = p.parse_args(argv)
    summary = summarise(a.work, a.probs, a.seeds)
    block = markdown(summary)
    print(block)
    if a.publish:
        for name, run in summary[
            "commands"
        ].items():  # keep the dev predictions beside the results file
            kept = a.out / "glue_predictions" / f"{name}.txt"
            kept.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / run["predictions"], kept)
            run["predictions"] = (
                str(kept.relative_to(ROOT)) if kept.resolve().is_relative_to(ROOT) else str(kept)
            )
        summary["figures"] = plot(summary, a.out)
        summary["driver"] = (
            "python -m reproduction.position_masking.glue_run --glue GLUE_DIR "
            "--wikitext WIKITEXT/wiki.valid.raw --plugin-root SNAPSHOT"
        )
        (a.out / "glue.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
        write_between_markers(PAGE, block, "<!-- table3-glue:start -->", "<!-- table3-glue:end -->")
        write_between_markers(
            PAGE,
            page_summary(summary),
            "<!-- table3-glue-summary:start -->",
            "<!-- table3-glue-summary:end -->",
        )


if __name__ == "__main__":
    main()

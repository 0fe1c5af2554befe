#!/usr/bin/env python
"""Collect the runs of compare_gigaword.sh into table 2 (docs/results/prophetnet.md).

    python -m reproduction.prophetnet.collect_gigaword --work DIR [--runs KEPT] [--publish DIR]
    [--page PAGE.md] python -m reproduction.prophetnet.collect_gigaword --keep RUN --kept
    KEPT/NAME-sSEED python -m reproduction.prophetnet.collect_gigaword --is-kept KEPT/NAME-sSEED
    --eval-at "250 500"

Reads ``KEPT/NAME-sSEED/results.json`` (written by gigaword.sh, reference_transformers.py
and unilm/gigaword.sh; KEPT defaults to ``DIR/runs``) and writes ``DIR/results.json``,
``DIR/results.md`` and ``DIR/rouge_curves.png``: per model and scored point, the number of seeds,
the mean and standard deviation over seeds of ROUGE-1/2/L F1 and of the per-stream validation
accuracy, and the distinct headlines (mean, min, max over seeds). Comparisons: each row against
ProphetNet n = 1 (and each transformers reference row against the same n here) by a paired
bootstrap over the validation articles of the sentence ROUGE-1 F1 averaged over random seeds
(rouge-score), two-sided, 1000 resamples; the verdict at each point is "better" or "worse" where p <
0.05, else "no significant difference". ``--publish`` copies the three files (the figure into
``figures/``); ``--page`` rewrites the block between ``<!-- table2:start -->`` and
``<!-- table2:end -->`` of a Markdown page (docs/results/prophetnet.md; with ``--bisection``,
the block between ``<!-- bisection:start -->`` and ``<!-- bisection:end -->``).

``--keep`` copies a finished run's results.json and its hypotheses (gzipped, one file per
scored point) into the committed folder of kept runs, so that the table outlives the ignored
work folder; ``--is-kept`` exits 0 when a kept run holds every given point.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
import statistics
from pathlib import Path

import numpy as np

from fairseq_ext.common.errors import FairseqExtError
from reproduction.results_page import write_between_markers

ROOT = Path(__file__).resolve().parents[2]

LABELS = {
    "transformer": "Transformer (same sizes)",
    "p1": "ProphetNet n=1 (next token only)",
    "p2": "ProphetNet n=2",
    "p2-g0.5": "ProphetNet n=2, gamma 0.5",
    "p2-m1": "ProphetNet n=2, batches not rounded to 8 pairs",
    "p3": "ProphetNet n=3",
    "ref-p1": "transformers' ProphetNet n=1 (reference)",
    "ref-p2": "transformers' ProphetNet n=2 (reference)",
    "p1-pt": "ProphetNet n=1 + span pre-training",
    "p2-pt": "ProphetNet n=2 + span pre-training",
    "p3-pt": "ProphetNet n=3 + span pre-training",
    "unilm": "UniLM prefix mask (6 x 256)",
}
COMPARISONS = [
    ("transformer", "p1"),
    ("p2", "p1"),
    ("p2-g0.5", "p1"),
    ("p2-g0.5", "p2"),
    ("p2-m1", "p2"),
    ("p3", "p1"),
    ("p3", "p2"),
    ("ref-p1", "p1"),
    ("ref-p2", "p2"),
    ("p1-pt", "p1"),
    ("p2-pt", "p2"),
    ("p3-pt", "p3"),
    ("p2-pt", "p1-pt"),
    ("p3-pt", "p1-pt"),
    ("unilm", "transformer"),
]
METRICS = ("rouge1_f1", "rouge2_f1", "rougeL_f1")
RESAMPLES = 1000
START, END = "<!-- table2:start -->", "<!-- table2:end -->"
BISECTION = {
    "fairseq-train": (
        "fairseq-train, this plugin's prophetnet, length-sorted batches (table 2's earlier run)"
    ),
    "fairseq-train-unsorted": (
        "fairseq-train --unsorted-batches, this plugin's prophetnet (table 2's run)"
    ),
    "ours": "this plugin's prophetnet in the reference loop",
    "hf": "transformers' ProphetNet, layout corrected",
    "hf-as-released": "transformers' ProphetNet, layout as released",
    "ours-unsorted": "this plugin's prophetnet in the reference loop, the loop's unsorted batches",
    "hf-unsorted": "transformers' ProphetNet (corrected), the loop's unsorted batches",
    "ours-fairseq-unsorted": (
        "this plugin's prophetnet in the reference loop, fairseq-train --unsorted-batches' batches"
    ),
}
# Table 2's fairseq-train n = 2 runs in the bisection: the kept runs of compare_gigaword.sh per
# batching.
FAIRSEQ_TRAIN_ROWS = {"fairseq-train": "sorted", "fairseq-train-unsorted": "unsorted"}


def points_of(result: dict) -> dict:
    """``{update: point}`` from any of the three results formats."""
    points = result.get("points")
    if isinstance(points, dict):
        return {int(u): p for u, p in points.items()}
    if isinstance(points, list):
        return {int(p["update"]): p for p in points}
    update = result.get("finetune_updates", result.get("updates"))
    return {int(update): {k: result.get(k) for k in (*METRICS, "sentences")}}


def runs_of(folder: Path, labels: dict | None = None) -> dict:
    """``{name: {seed: (run folder, results)}}`` of every finished run in ``folder`` whose name
    is one of ``labels`` (default: table 2's rows)."""
    labels = LABELS if labels is None else labels
    runs: dict = {}
    for path in sorted(folder.glob("*-s*/results.json")):
        match = re.fullmatch(r"(.+)-s(\d+)", path.parent.name)
        if match and match.group(1) in labels:
            runs.setdefault(match.group(1), {})[int(match.group(2))] = (
                path.parent,
                json.loads(path.read_text()),
            )
    return runs


def hypothesis_file(folder: Path, update: int) -> Path | None:
    """The hypotheses of one scored point: ``hyp-U.title`` or its kept ``hyp-U.title.gz``."""
    for path in (folder / f"hyp-{update}.title", folder / f"hyp-{update}.title.gz"):
        if path.exists():
            return path
    return None


def distinct_outputs(folder: Path, update: int, point: dict) -> int | None:
    """How many different headlines a point wrote: its results file's count, else counted from
    its hypotheses (examples/unilm/gigaword.sh does not count them)."""
    if point.get("distinct_hypotheses") is not None:
        return point["distinct_hypotheses"]
    path = hypothesis_file(folder, update)
    return len(set(read_lines(path))) if path else None


def read_lines(path: Path) -> list:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def repository_relative(command: str) -> str:
    """A command with this clone's absolute paths written relative to the repository."""
    return command.replace(str(ROOT) + "/", "").replace(str(ROOT), ".")


def keep(run: Path, dest: Path) -> None:
    """Copy a finished run's results.json and its hypotheses per point (gzipped) to ``dest``."""
    result_file = run / "results.json"
    if not result_file.exists():
        raise SystemExit(f"error: {run} has no results.json; finish the run before keeping it")
    result = json.loads(result_file.read_text())
    updates = sorted(points_of(result))
    dest.mkdir(parents=True, exist_ok=True)
    for update in updates:
        source = hypothesis_file(run, update)
        if source is None and len(updates) == 1 and (run / "hyp.txt").exists():
            source = run / "hyp.txt"
        if source is None:
            raise SystemExit(
                f"error: {run} has no hypotheses of update {update} (hyp-{update}.title)"
            )
        text = ("\n".join(read_lines(source)) + "\n").encode("utf-8")
        with (
            open(dest / f"hyp-{update}.title.gz", "wb") as raw,
            gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f,
        ):
            f.write(
                text
            )  # no time stamp in the header: keeping a run again leaves its files byte for byte
    result["points_done"] = updates
    if isinstance(result.get("commands"), list):
        result["commands"] = [repository_relative(c) for c in result["commands"]]
    (dest / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"kept {run.name}: points {updates} -> {dest}")


def is_kept(dest: Path, updates: list) -> bool:
    path = dest / "results.json"
    if not path.exists():
        return False
    done = set(json.loads(path.read_text()).get("points_done", []))
    return set(updates) <= done and all(hypothesis_file(dest, u) for u in updates)


def mean_std(values: list) -> tuple:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def sentence_rouge1(hyp_file: Path, refs: list) -> np.ndarray:
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=True)
    hyps = read_lines(hyp_file)
    if len(hyps) != len(refs):
        raise SystemExit(f"error: {hyp_file} has {len(hyps)} lines for {len(refs)} references")
    return np.array([100.0 * scorer.score(r, h)["rouge1"].fmeasure for h, r in zip(hyps, refs)])


def paired_bootstrap(a: np.ndarray, b: np.ndarray, seed: int = 12345) -> float:
    """Two-sided p-value of ``mean(a) != mean(b)`` by resampling the paired sentences."""
    rng = np.random.default_rng(seed)
    diff = a - b
    idx = rng.integers(0, len(diff), size=(RESAMPLES, len(diff)))
    means = diff[idx].mean(axis=1)
    tail = min((means <= 0).mean(), (means >= 0).mean())
    return float(min(1.0, 2 * tail))


def summarise(
    folder: Path, refs: list | None, labels: dict | None = None, pairs: list | None = None
) -> dict:
    """Mean and spread per model and point, and the bootstrap comparisons of ``pairs``
    (``[(row, the row it is compared with), ...]``); ``labels``/``pairs`` default to table 2's."""
    labels = LABELS if labels is None else labels
    pairs = COMPARISONS if pairs is None else pairs
    runs = runs_of(folder, labels)
    if not runs:
        raise SystemExit(f"error: no run under {folder} has a results.json")
    models, per_sentence = {}, {}
    for name in labels:
        if name not in runs:
            continue
        seeds = runs[name]
        by_update: dict = {}
        for seed, (folder, result) in seeds.items():
            for update, point in points_of(result).items():
                by_update.setdefault(update, {})[seed] = (folder, point)
        rows = {}
        for update, at in sorted(by_update.items()):
            points = [p for _, p in at.values()]
            row = {"seeds": sorted(at), "n_seeds": len(at)}
            for m in METRICS:
                row[m], row[m + "_std"] = mean_std([p[m] for p in points])
            distinct = [distinct_outputs(folder, update, p) for folder, p in at.values()]
            distinct = [d for d in distinct if d is not None]
            if distinct:
                row["distinct_mean"], row["distinct_min"], row["distinct_max"] = (
                    statistics.fmean(distinct),
                    min(distinct),
                    max(distinct),
                )
            accs = [
                p["valid_accuracy_per_stream"] for p in points if p.get("valid_accuracy_per_stream")
            ]
            if accs:
                row["valid_accuracy_per_stream"] = [
                    round(statistics.fmean(s), 2) for s in zip(*accs)
                ]
            hyps = [hypothesis_file(folder, update) for folder, _ in at.values()]
            if refs is not None and all(hyps):
                per_sentence[(name, update)] = np.mean(
                    [sentence_rouge1(h, refs) for h in hyps], axis=0
                )
            rows[update] = row
        first = next(iter(seeds.values()))[1]
        models[name] = {
            "label": labels[name],
            "points": rows,
            "pretrain_updates": first.get("pretrain_updates", 0),
            "wall_seconds": sum(_wall(r) for _, r in seeds.values()),
            "commands": {seed: r.get("commands") for seed, (_, r) in seeds.items()},
            "hardware": first.get("hardware"),
        }
    comparisons = []
    for name, base in pairs:
        if name not in models or base not in models:
            continue
        for update in sorted(set(models[name]["points"]) & set(models[base]["points"])):
            if (name, update) not in per_sentence or (base, update) not in per_sentence:
                continue
            a, b = per_sentence[(name, update)], per_sentence[(base, update)]
            p = paired_bootstrap(a, b)
            delta = float(a.mean() - b.mean())
            verdict = (
                "no significant difference" if p >= 0.05 else ("better" if delta > 0 else "worse")
            )
            comparisons.append(
                {
                    "model": name,
                    "baseline": base,
                    "update": update,
                    "delta_rouge1": round(delta, 2),
                    "p_value": round(p, 4),
                    "verdict": verdict,
                    "seeds": [
                        models[name]["points"][update]["n_seeds"],
                        models[base]["points"][update]["n_seeds"],
                    ],
                }
            )
    return {
        "validation": "1000 Gigaword validation pairs (the test split is withheld)",
        "scorer": "rouge-score (stemmed), F1 x 100; mean and standard deviation over seeds",
        "decoding": "fairseq beam search: beam 4, lenpen 1.0, no-repeat-ngram 3, max length 40",
        "significance": (
            "paired bootstrap over validation articles of sentence ROUGE-1 averaged over random "
            f"seeds, two-sided, {RESAMPLES} resamples, p < 0.05"
        ),
        "batching": batching(models),
        "wall_seconds_all_runs": sum(m["wall_seconds"] for m in models.values()),
        "models": models,
        "comparisons": comparisons,
        "findings": findings(models, comparisons),
    }


def batching(models: dict) -> str:
    """How the fine-tuning batches were cut, read from every run's commands; rows that differ
    from the rest are named."""
    kinds = {}
    for model in models.values():
        for commands in model["commands"].values():
            text = " ".join(commands or [])
            unsorted = "--unsorted-batches" in text or "--batching unsorted" in text
            kinds.setdefault("unsorted" if unsorted else "sorted", []).append(model["label"])
    unsorted = "pairs in a random order, then cut into batches of --max-tokens (--unsorted-batches)"
    if set(kinds) == {"unsorted"}:
        return unsorted
    if set(kinds) == {"sorted"}:
        return "fairseq's length-sorted batches"
    sorted_rows = ", ".join(dict.fromkeys(kinds["sorted"]))
    return f"{unsorted}, except {sorted_rows}: length-sorted batches"


def _wall(result: dict) -> float:
    wall = result.get("wall_seconds", 0)
    return wall.get("total", 0) if isinstance(wall, dict) else wall


def findings(models: dict, comparisons: list) -> list:
    """One plain sentence per comparison: the verdict at every point."""
    out = []
    by_pair: dict = {}
    for c in comparisons:
        by_pair.setdefault((c["model"], c["baseline"]), []).append(c)
    for (name, base), rows in by_pair.items():
        parts = [
            f"{c['verdict']} at {c['update']} updates (ROUGE-1 {c['delta_rouge1']:+.2f}, p = "
            f"{c['p_value']:.3f}, {c['seeds'][0]} vs {c['seeds'][1]} seeds)"
            for c in rows
        ]
        out.append(f"{models[name]['label']} vs {models[base]['label']}: " + "; ".join(parts) + ".")
    return out


def _pm(row: dict, m: str) -> str:
    return f"{row[m]:.2f} ± {row[m + '_std']:.2f}" if row["n_seeds"] > 1 else f"{row[m]:.2f}"


def markdown(summary: dict) -> str:
    lines = [f"Fine-tuning batches: {summary['batching']}.", ""] if summary.get("batching") else []
    shared = set.intersection(*(set(m["points"]) for m in summary["models"].values()))
    if shared and any(max(m["points"]) > max(shared) for m in summary["models"].values()):
        lines += [
            f"Every row at {max(shared)} updates, the last point all rows reached (later points: "
            "the second table).",
            "",
        ]
    lines += [
        "| model | seeds | updates | ROUGE-1 | ROUGE-2 | ROUGE-L | distinct headlines (min-max) "
        "| valid accuracy per stream (%) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, model in summary["models"].items():
        update = max(shared) if shared else max(model["points"])
        row = model["points"][update]
        pre = f"{model['pretrain_updates']} + " if model["pretrain_updates"] else ""
        distinct = (
            f"{row['distinct_mean']:.0f} ({row['distinct_min']}-{row['distinct_max']})"
            if "distinct_mean" in row
            else "-"
        )
        acc = " / ".join(f"{a:.1f}" for a in row.get("valid_accuracy_per_stream", [])) or "-"
        lines.append(
            f"| {model['label']} | {row['n_seeds']} | {pre}{update} | {_pm(row, 'rouge1_f1')} "
            f"| {_pm(row, 'rouge2_f1')} | {_pm(row, 'rougeL_f1')} | {distinct} | {acc} |"
        )
    updates = sorted({u for m in summary["models"].values() for u in m["points"]})
    lines += [
        "",
        "ROUGE-1 along training (mean ± std over seeds; distinct headlines in brackets):",
        "",
        "| model | " + " | ".join(f"{u} updates" for u in updates) + " |",
        "|---|" + "---|" * len(updates),
    ]
    for model in summary["models"].values():
        cells = []
        for u in updates:
            row = model["points"].get(u)
            cells.append(
                ""
                if row is None
                else _pm(row, "rouge1_f1")
                + (f" ({row['distinct_mean']:.0f})" if "distinct_mean" in row else "")
            )
        lines.append(f"| {model['label']} | " + " | ".join(cells) + " |")
    if summary["findings"]:
        lines += ["", "Significance (" + summary["significance"] + "):", ""]
        lines += [f"- {f}" for f in summary["findings"]]
    return "\n".join(lines) + "\n"


def plot(summary: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for model in summary["models"].values():
        updates = sorted(model["points"])
        if len(updates) < 2:
            continue
        for ax, metric in zip(axes, ("rouge1_f1", "rougeL_f1")):
            mean = [model["points"][u][metric] for u in updates]
            std = [model["points"][u][metric + "_std"] for u in updates]
            ax.errorbar(updates, mean, yerr=std, marker="o", capsize=3, label=model["label"])
    for ax, name in zip(axes, ("ROUGE-1", "ROUGE-L")):
        ax.set(
            xlabel="fine-tuning updates",
            ylabel=f"{name} F1 x 100 (mean ± std over seeds)",
            title=f"Gigaword valid, {name}",
        )
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def write_into_page(page: Path, table: str, start: str = START, end: str = END) -> None:
    try:
        write_between_markers(page, table, start, end)
    except FairseqExtError as e:
        raise SystemExit(f"error: {e}") from None


def bisection(folder: Path, kept: Path, published: Path | None = None) -> dict:
    """The variants of bisect.sh (``folder/NAME-sSEED/results.json``) and table 2's fairseq-train
    n = 2 runs (``kept/BATCHING/p2-sSEED``), per seed and scored point. A variant with no run on
    disk keeps its row from ``published`` (an earlier bisection.json), so the table survives a
    fresh work folder."""
    earlier = (
        json.loads(published.read_text())["variants"] if published and published.exists() else {}
    )
    rows = {}
    for name, label in BISECTION.items():
        if name in FAIRSEQ_TRAIN_ROWS:
            pattern = (kept / FAIRSEQ_TRAIN_ROWS[name], "p2-s*")
        else:
            pattern = (folder, f"{name}-s*")
        seeds = {}
        for path in sorted(pattern[0].glob(f"{pattern[1]}/results.json")):
            seed = re.fullmatch(r".*-s(\d+)", path.parent.name)
            if seed:
                result = json.loads(path.read_text())
                seeds[int(seed.group(1))] = {
                    "commands": result.get("commands") or [result.get("command")],
                    "points": {
                        u: {
                            k: p.get(k)
                            for k in (
                                *METRICS,
                                "distinct_hypotheses",
                                "valid_accuracy_per_stream",
                                "train_loss_last_50",
                            )
                        }
                        for u, p in sorted(points_of(result).items())
                    },
                }
        if not seeds and name in earlier:
            seeds = {
                int(seed): dict(run, points={int(u): p for u, p in run["points"].items()})
                for seed, run in earlier[name]["seeds"].items()
            }
        if seeds:
            rows[name] = {"label": label, "seeds": dict(sorted(seeds.items()))}
    if not rows:
        raise SystemExit(f"error: no variant under {folder} has a results.json")
    return {
        "question": "why ProphetNet n = 2 writes one headline for every article after 500 updates",
        "run": (
            "n = 2, data and recipe of table 2, 500 updates of 2048 tokens, one part swapped "
            "per row"
        ),
        "variants": rows,
    }


def bisection_markdown(summary: dict) -> str:
    updates = sorted(
        {u for r in summary["variants"].values() for s in r["seeds"].values() for u in s["points"]}
    )
    lines = [
        "| variant (n = 2) | seeds | "
        + " | ".join(
            f"{u} updates: ROUGE-1 (mean) / distinct headlines per seed / accuracy s1 (mean, %)"
            for u in updates
        )
        + " |",
        "|---|---|" + "---|" * len(updates),
    ]
    for row in summary["variants"].values():
        cells = []
        for u in updates:
            points = [s["points"][u] for s in row["seeds"].values() if u in s["points"]]
            if not points:
                cells.append("")
                continue
            r1 = statistics.fmean(p["rouge1_f1"] for p in points)
            acc = statistics.fmean(p["valid_accuracy_per_stream"][0] for p in points)
            distinct = ", ".join(str(p["distinct_hypotheses"]) for p in points)
            cells.append(f"{r1:.2f} / {distinct} / {acc:.1f}")
        lines.append(
            f"| {row['label']} | {', '.join(map(str, row['seeds']))} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines) + "\n"


def publish_bisection(args) -> None:
    summary = bisection(
        args.bisection,
        args.runs or Path(__file__).resolve().parent / "runs",
        (args.publish or Path(__file__).resolve().parent) / "bisection.json",
    )
    table = bisection_markdown(summary)
    (args.bisection / "bisection.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(table, end="")
    if args.publish:
        args.publish.mkdir(parents=True, exist_ok=True)
        shutil.copy(args.bisection / "bisection.json", args.publish / "bisection.json")
    if args.page:
        write_into_page(args.page, table, "<!-- bisection:start -->", "<!-- bisection:end -->")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--work", type=Path, help="compare_gigaword.sh's folder")
    p.add_argument("--keep", type=Path, help="a finished run to copy into --kept")
    p.add_argument("--kept", type=Path, help="with --keep: the kept run's folder")
    p.add_argument(
        "--is-kept", type=Path, help="exit 0 when this kept run holds every --eval-at point"
    )
    p.add_argument("--eval-at", default="", help='with --is-kept: the points, e.g. "250 500"')
    p.add_argument("--bisection", type=Path, help="bisect.sh's folder: write its table instead")
    p.add_argument(
        "--runs",
        type=Path,
        help="folder of table 2's runs, NAME-sSEED each (default WORK/runs; with "
        "--bisection the kept runs, BATCHING/p2-sSEED, whose n = 2 runs are "
        "the fairseq-train rows, default reproduction/prophetnet/runs)",
    )
    p.add_argument(
        "--refs",
        type=Path,
        help="validation titles (default WORK/data/raw/valid.title); without "
        "them no significance test is run",
    )
    p.add_argument(
        "--publish", type=Path, help="folder that gets results.json, results.md and figures/"
    )
    p.add_argument(
        "--page", type=Path, help="Markdown page whose table-2 (or bisection) block is rewritten"
    )
    args = p.parse_args(argv)
    if args.keep:
        if args.kept is None:
            p.error("--keep needs --kept KEPT/NAME-sSEED")
        keep(args.keep, args.kept)
        return
    if args.is_kept:
        raise SystemExit(0 if is_kept(args.is_kept, [int(u) for u in args.eval_at.split()]) else 1)
    if args.bisection:
        publish_bisection(args)
        return
    if args.work is None:
        p.error("give --work DIR (or --bisection DIR)")
    refs_file = args.refs or args.work / "data" / "raw" / "valid.title"
    refs = refs_file.read_text().splitlines() if refs_file.exists() else None
    summary = summarise(args.runs or args.work / "runs", refs)
    table = markdown(summary)
    (args.work / "results.json").write_text(json.dumps(summary, indent=2) + "\n")
    (args.work / "results.md").write_text(table)
    plot(summary, args.work / "rouge_curves.png")
    print(table, end="")
    if args.publish:
        (args.publish / "figures").mkdir(parents=True, exist_ok=True)
        shutil.copy(args.work / "results.json", args.publish / "results.json")
        shutil.copy(args.work / "results.md", args.publish / "results.md")
        shutil.copy(
            args.work / "rouge_curves.png", args.publish / "figures" / "gigaword_rouge_curves.png"
        )
        print(f"published to {args.publish}")
    if args.page:
        write_into_page(args.page, table)


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Collect the runs of examples/hi_cmlm/multi30k.sh into results.json, a Markdown table and
a plot (BLEU after each iteration, mean over seeds).

    python examples/hi_cmlm/collect_results.py --work DIR --ref RAW_REFERENCE [--meta JSON]

DIR/runs/<name>-seed<k>/ holds each run's generate.txt (with --retain-iter-history for the
non-autoregressive ones), bleu.json and train.log (for the number of updates a time budget
allowed). References are the raw reference lines. --publish DIR copies results.json,
results.md and the plot there (the copies the README cites).
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
from collections import defaultdict
from pathlib import Path

from fairseq_ext.analysis.generate_output import read_generate_output
from fairseq_ext.analysis.iterations import LENGTH_BINS, bin_label, bleu_by_length, bleu_per_iteration

ITERATIONS = (1, 2, 4, 10)
ORDER = ["hi_cmlm-fence_replace", "hi_cmlm-all_mask", "hi_cmlm-all_copied", "hi_cmlm-weighted_sum",
         "cmlm_transformer", "ar_transformer"]


def run_results(run_dir: Path, refs: list[str]) -> dict:
    sentences = read_generate_output(str(run_dir / "generate.txt"))
    if len(sentences) != len(refs):
        raise SystemExit(f"{run_dir}: {len(sentences)} decoded sentences for {len(refs)} references")
    for d, r in zip(sentences, refs):
        d.reference = r
    bleu = json.loads((run_dir / "bleu.json").read_text())
    out = {"bleu": bleu["score"], "signature": bleu["signature"],
           "bleu_by_length": dict(zip([bin_label(*b) for b in LENGTH_BINS], bleu_by_length(sentences)))}
    updates = re.findall(r"num_updates (\d+)", (run_dir / "train.log").read_text()) \
        if (run_dir / "train.log").exists() else []
    out["updates"] = int(updates[-1]) if updates else None
    if sentences[0].history:
        per_iter = bleu_per_iteration(sentences, max(ITERATIONS), "sentencepiece")
        out["bleu_per_iteration"] = per_iter
    return out


def mean(xs: list[float]) -> float:
    return statistics.fmean(xs) if xs else float("nan")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", required=True)
    p.add_argument("--ref", required=True)
    p.add_argument("--meta", default="{}", help="JSON merged into results.json (commands, hardware, times)")
    p.add_argument("--publish", help="folder that gets copies of results.json, results.md and the plot")
    args = p.parse_args()
    work = Path(args.work)
    refs = Path(args.ref).read_text(encoding="utf-8").splitlines()
    runs: dict[str, dict[str, dict]] = defaultdict(dict)
    for run_dir in sorted((work / "runs").iterdir()):
        if not (run_dir / "bleu.json").exists():
            continue
        name, seed = run_dir.name.rsplit("-seed", 1)
        runs[name][seed] = run_results(run_dir, refs)

    summary = {}
    for name in sorted(runs, key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER)):
        seeds = runs[name]
        row = {"seeds": sorted(seeds), "bleu": mean([s["bleu"] for s in seeds.values()]),
               "bleu_per_seed": {k: s["bleu"] for k, s in seeds.items()},
               "updates_per_seed": {k: s.get("updates") for k, s in seeds.items()},
               "bleu_by_length": {b: mean([s["bleu_by_length"][b] for s in seeds.values()])
                                  for b in next(iter(seeds.values()))["bleu_by_length"]}}
        if all("bleu_per_iteration" in s for s in seeds.values()):
            row["bleu_per_iteration"] = [mean([s["bleu_per_iteration"][t] for s in seeds.values()])
                                         for t in range(max(ITERATIONS))]
        summary[name] = row
    results = {**json.loads(args.meta), "runs": runs, "summary": summary}
    (work / "results.json").write_text(json.dumps(results, indent=2) + "\n")

    bins = [bin_label(*b) for b in LENGTH_BINS]
    head = ("| model | seeds (updates) | " + " | ".join(f"pass {t}" for t in ITERATIONS) + " | BLEU per seed | "
            + " | ".join(bins) + " |")
    lines = [head, "|" + "---|" * (3 + len(ITERATIONS) + len(bins))]
    for name, row in summary.items():
        its = row.get("bleu_per_iteration")
        cells = [f"{its[t - 1]:.2f}" if its else "" for t in ITERATIONS]
        if not its:
            cells[-1] = f"{row['bleu']:.2f} (beam 5)"
        updates = ", ".join(str(u) for u in row["updates_per_seed"].values() if u is not None)
        per_seed = " / ".join(f"{b:.1f}" for b in row["bleu_per_seed"].values())
        lines.append(f"| {name} | {len(row['seeds'])}{f' ({updates})' if updates else ''} | " + " | ".join(cells)
                     + f" | {per_seed} | " + " | ".join(f"{row['bleu_by_length'][b]:.2f}" for b in bins) + " |")
    table = "\n".join(lines)
    (work / "results.md").write_text(table + "\n")
    print(table)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for name, row in summary.items():
        if "bleu_per_iteration" in row:
            ax.plot(range(1, max(ITERATIONS) + 1), row["bleu_per_iteration"], marker="o", label=name)
        else:
            ax.axhline(row["bleu"], linestyle="--", color="grey", label=f"{name} (beam 5)")
    ax.set(xlabel="mask-predict decoder pass", ylabel="sacreBLEU (Multi30k val)",
           title="BLEU after each iteration (mean over seeds)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(work / "bleu_per_iteration.png", dpi=120)
    print(f"wrote {work / 'results.json'}, {work / 'results.md'}, {work / 'bleu_per_iteration.png'}")
    if args.publish:
        publish = Path(args.publish)
        (publish / "figures").mkdir(parents=True, exist_ok=True)
        shutil.copy(work / "results.json", publish / "results.json")
        shutil.copy(work / "results.md", publish / "results.md")
        shutil.copy(work / "bleu_per_iteration.png", publish / "figures" / "multi30k_bleu_per_iteration.png")
        print(f"published to {publish}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Collect the runs of reproduction/hi_cmlm/multi30k.sh into results.json, results.md and a plot.

    python -m reproduction.hi_cmlm.collect_results --work DIR --ref RAW_REFERENCE [--meta JSON]
                                               [--publish DIR] [--page docs/results/hi-cmlm.md]

DIR/runs/<run>-seed<k>/ holds a training (train.log) and one folder per decoding,
decode-<how>/ with generate.txt (every mask-predict pass kept), hyp.txt, bleu.json and
seconds. Each (run, decoding) pair is one row of the table. Per row: BLEU after passes
1/2/4/10 and by reference length (Wang et al. 2021, Table 2 and Figure 2), mean and sample
standard deviation over seeds, and sacreBLEU's paired bootstrap (1000 resamples) of the
final outputs against the CMLM row: per seed (same seed, hence same initial weights) and
pooled (the outputs of every random seed concatenated, each reference repeated). --publish DIR copies
results.json, results.md and the plot there (the copies the results page cites); --page FILE
replaces the table between the lines ``<!-- table1:start -->`` and ``<!-- table1:end -->``
of FILE (docs/results/hi-cmlm.md) with results.md.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from fairseq_ext.analysis.generate_output import read_generate_output
from reproduction.results_page import write_between_markers
from fairseq_ext.errors import FairseqExtError
from fairseq_ext.analysis.iterations import LENGTH_BINS, bin_label, bleu_by_length, bleu_per_iteration

PASSES = (1, 2, 4, 10)
BASELINE = "cmlm"
BOOTSTRAP_RESAMPLES = 1000
# row key -> what the paper calls it (Table 1), in the paper's order
ROWS = {
    "ar_teacher": "Transformer (the autoregressive teacher, beam 5)",
    "cmlm": "CMLM (fairseq cmlm_transformer)",
    "hi_cmlm-all_mask": "HI-CMLM + All Mask",
    "hi_cmlm-all_copied": "HI-CMLM + All Copied",
    "hi_cmlm-weighted_sum": "HI-CMLM + Weighted Sum",
    "hi_cmlm-fence_replace": "HI-CMLM + Fence Replace",
    "hi_cmlm_decoding_rule-fence_replace": "Fence Replace trained with its decoding input (ablation)",
}


def row_key(run: str, decoding: str) -> str:
    return run if decoding in ("ar", "cmlm") else f"{run}-{decoding}"


def relative(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        return str(path)


def decoding_results(run_dir: Path, dec_dir: Path, refs: list[str], root: Path) -> dict:
    sentences = read_generate_output(str(dec_dir / "generate.txt"))
    if len(sentences) != len(refs):
        raise SystemExit(f"error: {dec_dir}: {len(sentences)} decoded sentences for {len(refs)} references; "
                         "delete the folder and rerun the driver to decode it again")
    for d, r in zip(sentences, refs):
        d.reference = r
    bleu = json.loads((dec_dir / "bleu.json").read_text())
    by_length = [None if math.isnan(b) else b for b in bleu_by_length(sentences)]
    out = {"bleu": bleu["score"], "signature": bleu["signature"],
           "hypotheses": relative(dec_dir / "hyp.txt", root),
           "bleu_by_length": dict(zip([bin_label(*b) for b in LENGTH_BINS], by_length))}
    log = run_dir / "train.log"
    text = log.read_text() if log.exists() else ""
    updates = re.findall(r"num_updates (\d+)", text)
    out["updates"] = int(updates[-1]) if updates else None
    done = re.findall(r"done training in ([\d.]+) seconds", text)
    out["train_seconds"] = float(done[-1]) if done else None
    seconds = dec_dir / "seconds"
    out["decode_seconds"] = int(seconds.read_text()) if seconds.exists() else None
    if sentences[0].history:
        out["bleu_per_pass"] = bleu_per_iteration(sentences, max(PASSES), "sentencepiece")
    return out


def mean_std(xs: list[float]) -> dict:
    """Mean and sample standard deviation; NaN values (an empty length bin) are left out."""
    xs = [x for x in xs if not math.isnan(x)]
    return {"mean": statistics.fmean(xs) if xs else None,
            "std": statistics.stdev(xs) if len(xs) > 1 else None, "n": len(xs)}


def paired_bootstrap(ref: Path, baseline: Path, systems: list[Path]) -> list[float]:
    """p-values of sacreBLEU's paired bootstrap test of each system against the baseline."""
    cmd = ["sacrebleu", str(ref), "-i", str(baseline), *map(str, systems), "-m", "bleu", "--paired-bs",
           "--paired-bs-n", str(BOOTSTRAP_RESAMPLES), "-f", "json"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"error: sacrebleu --paired-bs failed: {proc.stderr.strip().splitlines()[-1:]}")
    rows = json.loads(proc.stdout)
    return [r["BLEU"]["p_value"] for r in rows[1:]]


def significance(work: Path, ref: Path, runs: dict, root: Path) -> dict:
    """Per seed and pooled paired bootstrap of every non-baseline row with hypotheses for the
    baseline's seeds."""
    out: dict[str, dict] = {}
    if BASELINE not in runs:
        return out
    others = [k for k in runs if k not in (BASELINE, "ar_teacher")]
    seeds = sorted(runs[BASELINE])
    for seed in seeds:
        rows = [k for k in others if seed in runs[k]]
        if rows:
            ps = paired_bootstrap(ref, root / runs[BASELINE][seed]["hypotheses"],
                                  [root / runs[k][seed]["hypotheses"] for k in rows])
            for k, p in zip(rows, ps):
                out.setdefault(k, {"per_seed": {}})["per_seed"][seed] = p
    pooled = work / "paired"
    pooled.mkdir(exist_ok=True)
    ref_lines = ref.read_text(encoding="utf-8").splitlines()

    def concat(key: str, common: list[str]) -> Path:
        path = pooled / f"{key}.txt"
        path.write_text("".join((root / runs[key][s]["hypotheses"]).read_text(encoding="utf-8") for s in common),
                        encoding="utf-8")
        return path

    for k in others:
        common = [s for s in seeds if s in runs[k]]
        if len(common) < 2:
            continue
        pooled_ref = pooled / f"ref-{len(common)}-seeds.txt"
        pooled_ref.write_text("".join(line + "\n" for line in ref_lines * len(common)), encoding="utf-8")
        (p,) = paired_bootstrap(pooled_ref, concat(BASELINE, common), [concat(k, common)])
        out.setdefault(k, {"per_seed": {}})["pooled"] = {"seeds": common, "p_value": p}
    return out


def summarise(runs: dict, tests: dict) -> dict:
    summary = {}
    for key in sorted(runs, key=lambda k: list(ROWS).index(k) if k in ROWS else len(ROWS)):
        seeds = runs[key]
        per = list(seeds.values())
        row = {"label": ROWS.get(key, key), "seeds": sorted(seeds), "bleu": mean_std([s["bleu"] for s in per]),
               "updates": sorted({s["updates"] for s in per if s["updates"] is not None}),
               "bleu_by_length": {b: mean_std([s["bleu_by_length"][b] for s in per
                                               if s["bleu_by_length"][b] is not None])
                                  for b in per[0]["bleu_by_length"]}}
        if all("bleu_per_pass" in s for s in per):
            row["bleu_after_pass"] = {str(t): mean_std([s["bleu_per_pass"][t - 1] for s in per]) for t in PASSES}
            row["bleu_per_pass_mean"] = [statistics.fmean(s["bleu_per_pass"][t] for s in per)
                                         for t in range(max(PASSES))]
        if key in tests:
            row["paired_bootstrap_vs_cmlm"] = tests[key]
            row["delta_vs_cmlm"] = mean_std([s["bleu"] - runs[BASELINE][seed]["bleu"]
                                             for seed, s in seeds.items() if seed in runs[BASELINE]])
        summary[key] = row
    return summary


def _ms(cell: dict | None) -> str:
    if cell is None or cell["mean"] is None:
        return ""
    return f"{cell['mean']:.2f}" + (f" ± {cell['std']:.2f}" if cell["std"] is not None else "")


def markdown(summary: dict) -> str:
    bins = [bin_label(*b) for b in LENGTH_BINS]
    head = ["row", "seeds", "updates"] + [f"pass {t}" for t in PASSES] + ["Δ vs CMLM", "p (pooled)", "p per seed"] \
        + bins
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in summary.values():
        after = row.get("bleu_after_pass")
        cells = [_ms(after[str(t)]) if after else "" for t in PASSES]
        if not after:
            cells[-1] = _ms(row["bleu"])
        test = row.get("paired_bootstrap_vs_cmlm", {})
        pooled = test.get("pooled", {}).get("p_value")
        per_seed = " / ".join(f"{p:.3f}" for p in test.get("per_seed", {}).values())
        lines.append("| " + " | ".join([row["label"], str(len(row["seeds"])), ", ".join(map(str, row["updates"])) or "-",
                                        *cells, _ms(row.get("delta_vs_cmlm")),
                                        "" if pooled is None else f"{pooled:.3f}", per_seed,
                                        *(_ms(row["bleu_by_length"][b]) for b in bins)]) + " |")
    return "\n".join(lines)


START, END = "<!-- table1:start -->", "<!-- table1:end -->"


def write_into_page(page: Path, table: str) -> None:
    """Replace what stands between the table-1 markers of ``page`` with ``table``."""
    try:
        write_between_markers(page, table + "\n", START, END)
    except FairseqExtError as e:
        sys.exit(f"error: {e}")


def plot(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for row in summary.values():
        if "bleu_per_pass_mean" in row:
            ax.plot(range(1, max(PASSES) + 1), row["bleu_per_pass_mean"], marker="o", label=row["label"])
        else:
            ax.axhline(row["bleu"]["mean"], linestyle="--", color="grey", label=row["label"])
    ax.set(xlabel="mask-predict decoder pass", ylabel="sacreBLEU (Multi30k val)",
           title="BLEU after each pass (mean over seeds)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", required=True)
    p.add_argument("--ref", required=True)
    p.add_argument("--root", default=str(Path(__file__).resolve().parents[2]),
                   help="paths in results.json are relative to this folder (the repository)")
    p.add_argument("--meta", default="{}", help="JSON merged into results.json (command, hardware, times)")
    p.add_argument("--publish", help="folder that gets copies of results.json, results.md and the plot")
    p.add_argument("--page", help="Markdown file whose table-1 markers get results.md (docs/results/hi-cmlm.md)")
    args = p.parse_args(argv)
    logging.getLogger().setLevel(logging.WARNING)  # importing fairseq sets the root logger to DEBUG
    work, ref, root = Path(args.work), Path(args.ref), Path(args.root).resolve()
    if not (work / "runs").is_dir():
        sys.exit(f"error: {work}/runs does not exist: run reproduction/hi_cmlm/multi30k.sh first")
    refs = ref.read_text(encoding="utf-8").splitlines()
    runs: dict[str, dict[str, dict]] = {}
    for run_dir in sorted((work / "runs").iterdir()):
        run, _, seed = run_dir.name.rpartition("-seed")
        for dec_dir in sorted(run_dir.glob("decode-*")):
            if (dec_dir / "bleu.json").exists():
                key = row_key(run, dec_dir.name[len("decode-"):])
                runs.setdefault(key, {})[seed] = decoding_results(run_dir, dec_dir, refs, root)
    if not runs:
        sys.exit(f"error: no finished decoding under {work}/runs")
    tests = significance(work, ref, runs, root)
    summary = summarise(runs, tests)
    seconds = [s.get(k) or 0 for row in runs.values() for s in row.values() for k in ("train_seconds", "decode_seconds")]
    results = {**json.loads(args.meta), "reference": relative(ref, root),
               "compute_minutes_all_runs": round(sum(seconds) / 60, 1),
               "bootstrap_resamples": BOOTSTRAP_RESAMPLES, "runs": runs, "summary": summary}
    (work / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    table = markdown(summary)
    (work / "results.md").write_text(table + "\n")
    print(table)
    plot(summary, work / "bleu_per_pass.png")
    print(f"wrote {work / 'results.json'}, {work / 'results.md'}, {work / 'bleu_per_pass.png'}")
    if args.publish:
        publish = Path(args.publish)
        (publish / "figures").mkdir(parents=True, exist_ok=True)
        shutil.copy(work / "results.json", publish / "results.json")
        shutil.copy(work / "results.md", publish / "results.md")
        shutil.copy(work / "bleu_per_pass.png", publish / "figures" / "multi30k_bleu_per_pass.png")
        print(f"published to {publish}")
    if args.page:
        write_into_page(Path(args.page), table)
        print(f"wrote table 1 into {args.page}")


if __name__ == "__main__":
    main()

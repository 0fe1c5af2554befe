#!/usr/bin/env python
"""Collect the runs of reproduction/hi_cmlm/multi30k.sh into results.json, results.md and a plot.

    python -m reproduction.hi_cmlm.collect_results --work DIR --ref RAW_REFERENCE [--meta JSON]
                        [--kept RESULTS_JSON] [--publish DIR] [--page docs/results/hi-cmlm.md]

DIR/runs/<run>-seed<k>/ holds a training (train.log) and one folder per decoding,
decode-<how>/ with generate.txt (every mask-predict pass kept), hyp.txt, bleu.json and
seconds. Each (run, decoding) pair is one row of the table. Per row: sacreBLEU (and, in
results.json, tokenized BLEU as the papers report WMT14 En-De: ``tokenized_bleu``); BLEU after
passes 1/2/4/10 and by reference length (Wang et al. 2021, Table 2 and Figure 2), mean and sample
standard deviation over seeds, a seed-paired t-test against the CMLM row and sacreBLEU's paired
bootstrap (1000 resamples) of the final outputs against it: per seed (same seed, hence same
initial weights) and pooled (the outputs of every random seed concatenated, each reference
repeated). A second table sets each training-input variant (Fence Replace trained with its
decoding input; other --train-copy-share values) against the paper's training (section 3.3,
share 0.5) with the same two tests.

--kept FILE (an earlier results.json) supplies the runs that DIR does not hold, so rows run by
an earlier call are not trained again; a bootstrap needs both runs' hypotheses, so a test that
cannot be recomputed keeps the p-value FILE recorded for the same seeds. --publish DIR copies
results.json, results.md and the plot there and every new run's hypotheses to DIR/hypotheses/
(the copies the results page cites); --page FILE replaces the table between the lines
``<!-- table1:start -->`` and ``<!-- table1:end -->`` of FILE (docs/results/hi-cmlm.md) with
results.md and the block ``<!-- table1-findings:start -->`` with what the tables show.
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

import sacrebleu

from fairseq_ext.analysis.generate_output import read_generate_output
from fairseq_ext.analysis.iterations import (
    LENGTH_BINS,
    bin_label,
    bleu_by_length,
    bleu_per_iteration,
)
from fairseq_ext.analysis.tokenized_bleu import tokenized_bleu
from fairseq_ext.common.errors import FairseqExtError
from reproduction.results_page import write_between_markers

PASSES = (1, 2, 4, 10)
BASELINE = "cmlm"
PAPER_TRAINING = "hi_cmlm-fence_replace"
BOOTSTRAP_RESAMPLES = 1000
# row key -> what the paper calls it (Table 1), in the paper's order
ROWS = {
    "ar_teacher": "Transformer (the autoregressive teacher, beam 5)",
    "cmlm": "CMLM (fairseq cmlm_transformer)",
    "hi_cmlm-all_mask": "HI-CMLM + All Mask",
    "hi_cmlm-all_copied": "HI-CMLM + All Copied",
    "hi_cmlm-weighted_sum": "HI-CMLM + Weighted Sum",
    "hi_cmlm-fence_replace": "HI-CMLM + Fence Replace",
    "hi_cmlm_decoding_rule-fence_replace": (
        "Fence Replace trained with its decoding input (ablation)"
    ),
}
COPY_SHARE_RUN = re.compile(r"hi_cmlm_copy(?P<share>[0-9.]+)-fence_replace")


def label(key: str) -> str:
    match = COPY_SHARE_RUN.fullmatch(key)
    if match:
        return f"HI-CMLM + Fence Replace, copy share {match['share']}"
    return ROWS.get(key, key)


def row_order(key: str) -> tuple:
    match = COPY_SHARE_RUN.fullmatch(key)
    if match:
        return (list(ROWS).index(PAPER_TRAINING), 1, float(match["share"]))
    return (list(ROWS).index(key) if key in ROWS else len(ROWS), 0, 0.0)


def training_variant(key: str) -> bool:
    """Rows trained with another input than the paper's (decoded like PAPER_TRAINING)."""
    return key == "hi_cmlm_decoding_rule-fence_replace" or bool(COPY_SHARE_RUN.fullmatch(key))


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
        raise SystemExit(
            f"error: {dec_dir}: {len(sentences)} decoded sentences for {len(refs)} references; "
            "delete the folder and rerun the driver to decode it again"
        )
    for d, r in zip(sentences, refs):
        d.reference = r
    bleu = json.loads((dec_dir / "bleu.json").read_text())
    by_length = [None if math.isnan(b) else b for b in bleu_by_length(sentences)]
    # the CLI's JSON rounds its score to one decimal; differences between systems need them all
    hyps = (dec_dir / "hyp.txt").read_text(encoding="utf-8").splitlines()
    tokenized = tokenized_bleu(hyps, refs, "de")
    out = {
        "bleu": sacrebleu.corpus_bleu(hyps, [refs]).score,
        "signature": bleu["signature"],
        "tokenized_bleu": tokenized["score"],
        "tokenized_signature": tokenized["signature"],
        "hypotheses": relative(dec_dir / "hyp.txt", root),
        "bleu_by_length": dict(zip([bin_label(*b) for b in LENGTH_BINS], by_length)),
    }
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
    return {
        "mean": statistics.fmean(xs) if xs else None,
        "std": statistics.stdev(xs) if len(xs) > 1 else None,
        "n": len(xs),
    }


def paired_bootstrap(ref: Path, baseline: Path, systems: list[Path]) -> list[float]:
    """p-values of sacreBLEU's paired bootstrap test of each system against the baseline."""
    cmd = [
        "sacrebleu",
        str(ref),
        "-i",
        str(baseline),
        *map(str, systems),
        "-m",
        "bleu",
        "--paired-bs",
        "--paired-bs-n",
        str(BOOTSTRAP_RESAMPLES),
        "-f",
        "json",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(
            f"error: sacrebleu --paired-bs failed: {proc.stderr.strip().splitlines()[-1:]}"
        )
    rows = json.loads(proc.stdout)
    return [r["BLEU"]["p_value"] for r in rows[1:]]


def paired_t(runs: dict, key: str, reference: str) -> dict | None:
    """Seed-paired t-test of the final BLEU of ``key`` against ``reference`` (same seed, same
    initial weights), with the mean and spread of the per-seed differences."""
    from scipy import stats

    seeds = sorted(set(runs[key]) & set(runs[reference]))
    if len(seeds) < 2:
        return None
    diffs = [runs[key][s]["bleu"] - runs[reference][s]["bleu"] for s in seeds]
    if (
        len(set(diffs)) == 1
    ):  # no spread (sacreBLEU's scores have one decimal): t is undefined, not infinite
        return {
            "seeds": seeds,
            "delta": mean_std(diffs),
            "p_value": None,
            "constant_difference": True,
        }
    p = stats.ttest_rel(
        [runs[key][s]["bleu"] for s in seeds], [runs[reference][s]["bleu"] for s in seeds]
    ).pvalue
    return {
        "seeds": seeds,
        "delta": mean_std(diffs),
        "p_value": None if math.isnan(p) else float(p),
    }


class Bootstrap:
    """sacreBLEU's paired bootstrap of rows against a reference row, from the hypotheses files
    (paths relative to ``root``); where a file is gone, the p-value ``kept`` recorded for the
    same comparison and seeds."""

    def __init__(self, work: Path, ref: Path, runs: dict, root: Path, kept: dict):
        self.work, self.ref, self.runs, self.root, self.kept = work, ref, runs, root, kept

    def has(self, key: str, seed: str) -> bool:
        return (self.root / self.runs[key][seed]["hypotheses"]).is_file()

    def against(self, reference: str, rows: list[str], field: str) -> dict:
        out: dict[str, dict] = {}
        for seed in sorted(self.runs.get(reference, {})):
            present = [k for k in rows if seed in self.runs[k]]
            fresh = [k for k in present if self.has(reference, seed) and self.has(k, seed)]
            if fresh:
                ps = paired_bootstrap(
                    self.ref,
                    self.root / self.runs[reference][seed]["hypotheses"],
                    [self.root / self.runs[k][seed]["hypotheses"] for k in fresh],
                )
                for k, p in zip(fresh, ps):
                    out.setdefault(k, {"per_seed": {}})["per_seed"][seed] = p
            for k in present:
                old = self.kept.get(k, {}).get(field, {}).get("per_seed", {}).get(seed)
                if k not in fresh and old is not None:
                    out.setdefault(k, {"per_seed": {}})["per_seed"][seed] = old
        for k in rows:
            common = [s for s in sorted(self.runs.get(reference, {})) if s in self.runs[k]]
            if len(common) < 2:
                continue
            if all(self.has(reference, s) and self.has(k, s) for s in common):
                (p,) = self.pooled(reference, k, common)
                out.setdefault(k, {"per_seed": {}})["pooled"] = {"seeds": common, "p_value": p}
            else:
                old = self.kept.get(k, {}).get(field, {}).get("pooled")
                if old is not None and old["seeds"] == common:
                    out.setdefault(k, {"per_seed": {}})["pooled"] = old
        return out

    def pooled(self, reference: str, key: str, seeds: list[str]) -> list[float]:
        folder = self.work / "paired"
        folder.mkdir(exist_ok=True)
        ref_lines = self.ref.read_text(encoding="utf-8").splitlines()
        pooled_ref = folder / f"ref-{len(seeds)}-seeds.txt"
        pooled_ref.write_text(
            "".join(line + "\n" for line in ref_lines * len(seeds)), encoding="utf-8"
        )
        files = []
        for k in (reference, key):
            path = folder / f"{k}.txt"
            path.write_text(
                "".join(
                    (self.root / self.runs[k][s]["hypotheses"]).read_text(encoding="utf-8")
                    for s in seeds
                ),
                encoding="utf-8",
            )
            files.append(path)
        return paired_bootstrap(pooled_ref, files[0], files[1:])


def significance(work: Path, ref: Path, runs: dict, root: Path, kept: dict | None = None) -> dict:
    """Per row: the bootstrap and a t-test paired by seed against CMLM and, for the training-input
    variants, against the paper's training."""
    boot = Bootstrap(work, ref, runs, root, kept or {})
    out: dict[str, dict] = {}
    comparisons = [
        (BASELINE, [k for k in runs if k not in (BASELINE, "ar_teacher")], "vs_cmlm"),
        (PAPER_TRAINING, [k for k in runs if training_variant(k)], "vs_paper_training"),
    ]
    for reference, rows, name in comparisons:
        if reference not in runs:
            continue
        for k, test in boot.against(reference, rows, f"paired_bootstrap_{name}").items():
            out.setdefault(k, {})[f"paired_bootstrap_{name}"] = test
        for k in rows:
            t = paired_t(runs, k, reference)
            if t:
                out.setdefault(k, {})[f"paired_t_{name}"] = t
    return out


def summarise(runs: dict, tests: dict) -> dict:
    summary = {}
    for key in sorted(runs, key=row_order):
        seeds = runs[key]
        per = list(seeds.values())
        row = {
            "label": label(key),
            "seeds": sorted(seeds),
            "bleu": mean_std([s["bleu"] for s in per]),
            "updates": sorted({s["updates"] for s in per if s["updates"] is not None}),
            "bleu_by_length": {
                b: mean_std(
                    [s["bleu_by_length"][b] for s in per if s["bleu_by_length"][b] is not None]
                )
                for b in per[0]["bleu_by_length"]
            },
        }
        if all("tokenized_bleu" in s for s in per):  # runs collected before it lack it
            row["tokenized_bleu"] = mean_std([s["tokenized_bleu"] for s in per])
        if all("bleu_per_pass" in s for s in per):
            row["bleu_after_pass"] = {
                str(t): mean_std([s["bleu_per_pass"][t - 1] for s in per]) for t in PASSES
            }
            row["bleu_per_pass_mean"] = [
                statistics.fmean(s["bleu_per_pass"][t] for s in per) for t in range(max(PASSES))
            ]
        row.update(tests.get(key, {}))
        if "paired_bootstrap_vs_cmlm" in row:
            row["delta_vs_cmlm"] = mean_std(
                [
                    s["bleu"] - runs[BASELINE][seed]["bleu"]
                    for seed, s in seeds.items()
                    if seed in runs[BASELINE]
                ]
            )
        summary[key] = row
    return summary


def _ms(cell: dict | None) -> str:
    if cell is None or cell["mean"] is None:
        return ""
    return f"{cell['mean']:.2f}" + (f" ± {cell['std']:.2f}" if cell["std"] is not None else "")


def _p(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def _per_seed(test: dict, seeds: list[str]) -> str:
    per = test.get("per_seed", {})
    return " / ".join(_p(per[s]) if s in per else "-" for s in seeds) if per else ""


def markdown(summary: dict) -> str:
    bins = [bin_label(*b) for b in LENGTH_BINS]
    head = (
        ["row", "seeds", "updates"]
        + [f"pass {t}" for t in PASSES]
        + ["Δ vs CMLM", "p (t, seeds)", "p (pooled)", "p per seed"]
        + bins
    )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in summary.values():
        after = row.get("bleu_after_pass")
        cells = [_ms(after[str(t)]) if after else "" for t in PASSES]
        if not after:
            cells[-1] = _ms(row["bleu"])
        test = row.get("paired_bootstrap_vs_cmlm", {})
        t = row.get("paired_t_vs_cmlm") or {}
        lines.append(
            "| "
            + " | ".join(
                [
                    row["label"],
                    str(len(row["seeds"])),
                    ", ".join(map(str, row["updates"])) or "-",
                    *cells,
                    _ms(row.get("delta_vs_cmlm")),
                    _p(t.get("p_value")),
                    _p(test.get("pooled", {}).get("p_value")),
                    _per_seed(test, row["seeds"]),
                    *(_ms(row["bleu_by_length"][b]) for b in bins),
                ]
            )
            + " |"
        )
    variants = [
        (k, row)
        for k, row in summary.items()
        if "paired_t_vs_paper_training" in row or "paired_bootstrap_vs_paper_training" in row
    ]
    if variants and PAPER_TRAINING in summary:
        paper = summary[PAPER_TRAINING]
        lines += [
            "",
            "Training input against the paper's (section 3.3, copy share 0.5; row "
            f'"{paper["label"]}", '
            f"BLEU {_ms(paper['bleu'])}), every model decoded with Fence Replace:",
            "",
            "| training | seeds | BLEU (pass 10) | Δ vs paper's training | p (t, seeds) | p "
            "(pooled) | p per seed |",
            "|---|---|---|---|---|---|---|",
        ]
        for _, row in variants:
            t = row.get("paired_t_vs_paper_training") or {}
            test = row.get("paired_bootstrap_vs_paper_training", {})
            lines.append(
                f"| {row['label']} | {len(row['seeds'])} | {_ms(row['bleu'])} | "
                f"{_ms(t.get('delta'))} | {_p(t.get('p_value'))} | "
                f"{_p(test.get('pooled', {}).get('p_value'))} | {_per_seed(test, row['seeds'])} |"
            )
    return "\n".join(lines)


ALPHA = 0.05
MIN_SEEDS = 3  # a difference is claimed only over at least this many seeds
STRATEGY_ROWS = [
    "hi_cmlm-all_mask",
    "hi_cmlm-all_copied",
    "hi_cmlm-weighted_sum",
    "hi_cmlm-fence_replace",
]


def _significant(test: dict | None) -> bool:
    return test is not None and test.get("p_value") is not None and test["p_value"] < ALPHA


def _tests(row: dict, against: str) -> str:
    t = row.get(f"paired_t_{against}") or {}
    boot = row.get(f"paired_bootstrap_{against}", {})
    parts = [
        f"Δ {t['delta']['mean']:+.2f} ± {t['delta']['std']:.2f}"
        if t.get("delta") and t["delta"]["std"] is not None
        else ""
    ]
    if t.get("p_value") is not None:
        parts.append(f"t-test p = {t['p_value']:.3f}")
    elif t.get("constant_difference"):
        parts.append("the same difference in every seed (t-test undefined)")
    if boot.get("pooled"):
        parts.append(f"pooled bootstrap p = {boot['pooled']['p_value']:.3f}")
    per = boot.get("per_seed", {})
    if per:
        parts.append(f"p < {ALPHA} in {sum(p < ALPHA for p in per.values())} of {len(per)} seeds")
    return ", ".join(x for x in parts if x)


def _better_share(row: dict) -> bool:
    """The copy-share rule: at least MIN_SEEDS seeds, better than the paper's training on average,
    a t-test paired by seed significant, and the pooled bootstrap too where it could run."""
    t = row["paired_t_vs_paper_training"]
    pooled = row.get("paired_bootstrap_vs_paper_training", {}).get("pooled")
    return (
        len(t["seeds"]) >= MIN_SEEDS
        and t["delta"]["mean"] > 0
        and _significant(t)
        and (pooled is None or _significant(pooled))
    )


def findings(summary: dict) -> str:
    """What Table 1 shows, each sentence computed from ``summary`` (verdicts at p < 0.05)."""
    out = []
    if BASELINE in summary:
        rows = [k for k in STRATEGY_ROWS if k in summary and "paired_t_vs_cmlm" in summary[k]]
        above = [k for k in rows if summary[k]["paired_t_vs_cmlm"]["delta"]["mean"] > 0]
        pooled = [
            k
            for k in rows
            if _significant(summary[k].get("paired_bootstrap_vs_cmlm", {}).get("pooled"))
        ]
        t_sig = [k for k in rows if _significant(summary[k]["paired_t_vs_cmlm"])]
        out.append(
            "- **Paper's training against CMLM** (same seed, same initial weights): "
            f"{len(above)} of {len(rows)} HI-CMLM decodings are above CMLM on average; "
            f"{len(pooled)} significantly by the pooled bootstrap, {len(t_sig)} by a t-test "
            "paired by seed. "
            + "; ".join(
                f"{summary[k]['label'][len('HI-CMLM + ') :]}: {_tests(summary[k], 'vs_cmlm')}"
                for k in rows
            )
            + "."
        )
        finals = {
            k: summary[k]["bleu_after_pass"]["10"]["mean"] for k in STRATEGY_ROWS if k in summary
        }
        if len(finals) > 1:
            best = max(finals, key=finals.get)
            out.append(
                "- **Decoding strategies of the same models** after 10 passes: "
                + ", ".join(
                    f"{summary[k]['label'][len('HI-CMLM + ') :]} {v:.2f}"
                    for k, v in sorted(finals.items(), key=lambda kv: -kv[1])
                )
                + f" (a range of {max(finals.values()) - min(finals.values()):.2f} BLEU; best: "
                + f"{summary[best]['label'][len('HI-CMLM + ') :]})."
            )
    variants = [k for k in summary if "paired_t_vs_paper_training" in summary[k]]
    for k in variants:
        row, t = summary[k], summary[k]["paired_t_vs_paper_training"]
        boot = row.get("paired_bootstrap_vs_paper_training", {}).get("pooled")
        sig = _significant(t) or _significant(boot)
        direction = "better" if t["delta"]["mean"] > 0 else "worse"
        if len(t["seeds"]) < MIN_SEEDS:
            verdict = (
                f"not judged: {len(t['seeds'])} seeds, a difference needs at least {MIN_SEEDS}"
            )
        else:
            verdict = (
                f"significantly {direction} than the paper's training"
                if sig
                else "no significant difference from the paper's training"
            )
        out.append(
            f"- **{row['label']}** ({len(row['seeds'])} seeds): {verdict}; "
            f"{_tests(row, 'vs_paper_training')}."
        )
    shares = [k for k in variants if COPY_SHARE_RUN.fullmatch(k)]
    if shares:
        better = [COPY_SHARE_RUN.fullmatch(k)["share"] for k in shares if _better_share(summary[k])]
        short = [
            COPY_SHARE_RUN.fullmatch(k)["share"]
            for k in shares
            if len(summary[k]["paired_t_vs_paper_training"]["seeds"]) < MIN_SEEDS
        ]
        out.append(
            "- **Default `--train-copy-share`**: the rule fixed before the sweep keeps 0.5 "
            f"unless another share, over at least {MIN_SEEDS} seeds, is better on average with a "
            "t-test paired by seed p < 0.05 and, where the hypotheses of both trainings are "
            "kept, the pooled bootstrap p < 0.05; "
            + (
                f"{', '.join(better)} met it."
                if better
                else "no share met it, so the default stays 0.5."
            )
            + (
                f" The sweep is not complete: {', '.join(short)} "
                f"{'has' if len(short) == 1 else 'have'} fewer than {MIN_SEEDS} seeds."
                if short
                else ""
            )
        )
    if "ar_teacher" in summary and BASELINE in summary:
        nat = [summary[k]["bleu"]["mean"] for k in summary if k != "ar_teacher"]
        out.append(
            f"- The autoregressive teacher ({summary['ar_teacher']['bleu']['mean']:.2f}) is "
            f"{summary['ar_teacher']['bleu']['mean'] - max(nat):.1f} to "
            f"{summary['ar_teacher']['bleu']['mean'] - min(nat):.1f} BLEU above every "
            f"non-autoregressive row after {', '.join(map(str, summary[BASELINE]['updates']))} "
            "updates."
        )
    return "\n".join(out) + "\n"


START, END = "<!-- table1:start -->", "<!-- table1:end -->"


FINDINGS = ("<!-- table1-findings:start -->", "<!-- table1-findings:end -->")


def write_into_page(page: Path, table: str, found: str) -> None:
    """Replace what stands between the table-1 markers of ``page`` with ``table`` and between
    its findings markers with ``found``."""
    try:
        write_between_markers(page, table + "\n", START, END)
        write_between_markers(page, found, *FINDINGS)
    except FairseqExtError as e:
        sys.exit(f"error: {e}")


def plot(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for row in summary.values():
        if "bleu_per_pass_mean" in row:
            ax.plot(
                range(1, max(PASSES) + 1), row["bleu_per_pass_mean"], marker="o", label=row["label"]
            )
        else:
            ax.axhline(row["bleu"]["mean"], linestyle="--", color="grey", label=row["label"])
    ax.set(
        xlabel="mask-predict decoder pass",
        ylabel="sacreBLEU (Multi30k val)",
        title="BLEU after each pass (mean over seeds)",
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def merge_kept(runs: dict, kept: dict) -> list[dict]:
    """Add to ``runs`` the (row, seed) pairs of ``kept`` that this work folder does not hold,
    and return kept's calls (an older file's one set of command fields is its first call)."""
    for key, seeds in kept.get("runs", {}).items():
        for seed, entry in seeds.items():
            runs.setdefault(key, {}).setdefault(seed, {"call": 0, **entry})
    if "calls" in kept:
        return kept["calls"]
    first = {
        k: kept[k]
        for k in ("command", "wall_minutes_this_call", "updates", "teacher", "work", "hardware")
        if k in kept
    }
    return [first] if first else []


def keep_hypotheses(runs: dict, fresh: set, folder: Path, root: Path) -> None:
    """Copy each fresh run's hypotheses to ``folder`` (kept in git) and point the run at the
    copy."""
    folder.mkdir(parents=True, exist_ok=True)
    for key, seed in sorted(fresh):
        dest = folder / f"{key}-seed{seed}.txt"
        shutil.copy(root / runs[key][seed]["hypotheses"], dest)
        runs[key][seed]["hypotheses"] = relative(dest, root)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--work", required=True)
    p.add_argument("--ref", required=True)
    p.add_argument(
        "--root",
        default=str(Path(__file__).resolve().parents[2]),
        help="paths in results.json are relative to this folder (the repository)",
    )
    p.add_argument(
        "--meta",
        default="{}",
        help="JSON of this call (command, hardware, times), added to its calls",
    )
    p.add_argument(
        "--kept", help="an earlier results.json whose runs this work folder does not hold"
    )
    p.add_argument(
        "--publish",
        help="folder that gets copies of results.json, results.md, the plot and hypotheses/",
    )
    p.add_argument(
        "--page",
        help="Markdown file whose table-1 markers get results.md (docs/results/hi-cmlm.md)",
    )
    args = p.parse_args(argv)
    logging.getLogger().setLevel(logging.WARNING)  # importing fairseq sets the root logger to DEBUG
    work, ref, root = Path(args.work), Path(args.ref), Path(args.root).resolve()
    if not (work / "runs").is_dir():
        sys.exit(f"error: {work}/runs does not exist: run reproduction/hi_cmlm/multi30k.sh first")
    refs = ref.read_text(encoding="utf-8").splitlines()
    kept = {}
    if args.kept:
        try:
            kept = json.loads(Path(args.kept).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            sys.exit(f"error: --kept {args.kept}: {e}")
    calls = merge_kept({}, kept)
    runs: dict[str, dict[str, dict]] = {}
    for run_dir in sorted((work / "runs").iterdir()):
        run, _, seed = run_dir.name.rpartition("-seed")
        for dec_dir in sorted(run_dir.glob("decode-*")):
            if (dec_dir / "bleu.json").exists():
                key = row_key(run, dec_dir.name[len("decode-") :])
                runs.setdefault(key, {})[seed] = {
                    "call": len(calls),
                    **decoding_results(run_dir, dec_dir, refs, root),
                }
    fresh = {(k, s) for k, seeds in runs.items() for s in seeds}
    if not fresh:
        sys.exit(f"error: no finished decoding under {work}/runs")
    merge_kept(runs, kept)
    if args.publish:
        keep_hypotheses(runs, fresh, Path(args.publish) / "hypotheses", root)
    tests = significance(work, ref, runs, root, kept.get("summary"))
    summary = summarise(runs, tests)
    seconds = [
        s.get(k) or 0
        for row in runs.values()
        for s in row.values()
        for k in ("train_seconds", "decode_seconds")
    ]
    results = {
        "calls": [*calls, json.loads(args.meta)],
        "reference": relative(ref, root),
        "compute_minutes_all_runs": round(sum(seconds) / 60, 1),
        "bootstrap_resamples": BOOTSTRAP_RESAMPLES,
        "runs": runs,
        "summary": summary,
    }
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
        write_into_page(Path(args.page), table, findings(summary))
        print(f"wrote table 1 into {args.page}")


if __name__ == "__main__":
    main()

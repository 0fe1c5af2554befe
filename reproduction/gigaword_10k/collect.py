"""The model rows of docs/results/gigaword-10k.md from the runs the driver kept: merges
``reproduction/gigaword_10k/runs/*.json`` into ``results.json`` (its lead-N and published parts
stay as ``lead_baseline.py`` wrote them) and rewrites the page's block and its summary lines.

    python -m reproduction.gigaword_10k.collect [--kept DIR] [--results FILE] [--page FILE]
    [--figure FILE]

Per row: test ROUGE-1/2/L (mean ± sd over seeds), valid ROUGE-1 at the chosen checkpoint and
length penalty, the learning rate (and the valid scores of its ``--lr-grid`` probes), the chosen
updates, why each run stopped, wall time. Runs moved to ``runs/superseded/`` (made at a rate the
grid then did not choose) are named under the table, out of it. Comparisons (``CLAIMS``):
the paired bootstrap over the test sentences of sentence ROUGE-1 averaged over seeds
(``reproduction/prophetnet/collect_gigaword.paired_bootstrap``, the test of the other tables),
and, where both rows have >= 2 common seeds, a t-test paired by seed of test ROUGE-1
(``scipy.stats.ttest_rel``); a claim with a margin ("at least 3 points above") tests the
difference less the margin. A verdict needs p < 0.05 in both tests (in the bootstrap alone where
a row has no seeds, as lead-8). The verdicts under the table are written from them, once every
trained row of a claim has ``protocol.SEEDS_FOR_A_VERDICT`` seeds (before, its numbers so
far are shown, the claim not decided). The curves (valid ROUGE-1 by update: every run, the
probes, lead-8 on the same pairs) go to ``--figure`` when matplotlib is installed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

from reproduction.gigaword_10k import page, protocol
from reproduction.gigaword_10k.driver import KEPT, ROWS, rel
from reproduction.results_page import write_between_markers

FIGURE = protocol.ROOT / "docs" / "results" / "figures" / "gigaword-10k-curves.png"
# (row, the row or baseline it is compared with, the claim it decides, the margin in ROUGE-1 points
# the row must stand above it: 0 for "above")
CLAIMS = [
    ("unilm-minilm", "lead-8", "UniLM from MiniLM is above lead-8 on test", 0.0),
    (
        "unilm-minilm",
        "lead-8",
        "UniLM from MiniLM is at least 3 ROUGE-1 above lead-8 on test (the issue's bar: "
        "several points)",
        3.0,
    ),
    (
        "unilm-minilm",
        "unilm-random",
        "a MiniLM start beats a random start (UniLM, Dong et al. 2019; Su 2019)",
        0.0,
    ),
    (
        "p2-pt",
        "p1-pt",
        "after pre-training, predicting 2 tokens ahead beats 1 (ProphetNet, Qi et al. 2020)",
        0.0,
    ),
    ("p1-pt", "p1", "span pre-training helps ProphetNet n = 1", 0.0),
    ("p2-pt", "p2", "span pre-training helps ProphetNet n = 2", 0.0),
    ("p2", "p1", "without pre-training, n = 2 against n = 1", 0.0),
    ("p1", "transformer", "ProphetNet n = 1 against fairseq's transformer of the same size", 0.0),
]
METRICS = ("rouge1", "rouge2", "rougeL")


def load_runs(kept: Path) -> dict:
    """{row: {seed: record}} of the finished fine-tuning runs in ``kept``."""
    runs: dict = {}
    for path in sorted(kept.glob("*-s*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        if record.get("row") in ROWS:
            runs.setdefault(record["row"], {})[record["seed"]] = record
    return runs


def mean_sd(values: list) -> list:
    """[mean, sample sd]; the sd of one seed is None (no spread is measured)."""
    return [
        round(statistics.fmean(values), 2),
        round(statistics.stdev(values), 2) if len(values) > 1 else None,
    ]


def seconds_per_update(records: list) -> float:
    """Training seconds an update, the median over the chunks of every run (a chunk trained partly
    before an interruption counts only its last part's seconds; the median sets such chunks
    aside)."""
    rates = [
        (p["train_seconds"] / (p["update"] - prev))
        for r in records
        for prev, p in zip([0] + [q["update"] for q in r["curve"]], r["curve"])
    ]
    return round(statistics.median(rates), 2)


def cost_by_machine(records: list) -> dict:
    """Each machine's cost (a record's ``hardware``): its seeds, its median seconds an update and a
    validation, its wall seconds. Runs on different machines are not pooled: their speeds differ."""
    machines: dict = {}
    for r in records:
        machines.setdefault(r["hardware"], []).append(r)
    return {
        hw: {
            "seeds": [r["seed"] for r in rs],
            "seconds_per_update": seconds_per_update(rs),
            "seconds_per_validation": round(
                statistics.median(p["decode_seconds"] for r in rs for p in r["curve"]), 1
            ),
            "wall_seconds": round(sum(r["wall_seconds"] for r in rs), 1),
        }
        for hw, rs in sorted(machines.items())
    }


def lenpen_of_converged(records: list) -> dict | None:
    """Valid ROUGE-1 of each length penalty of the grid, averaged over the runs that stopped by
    early stopping (at their best checkpoint), and the best of them: the length penalty the row's
    user script defaults to. None while no seed of the row has converged."""
    converged = [r for r in records if r["stopped"] == protocol.EARLY_STOPPED]
    if not converged:
        return None
    means = {
        lenpen: round(statistics.fmean(r["lenpen_grid"][lenpen]["rouge1"] for r in converged), 2)
        for lenpen in converged[0]["lenpen_grid"]
    }
    return {
        "seeds": [r["seed"] for r in converged],
        "mean_rouge1": means,
        "best": max(means, key=means.get),
    }


def batches_cut_per_start(records: list) -> dict:
    """{seed: {"up_to": the update up to which ``--unsorted-batches`` cut the run's batches again at
    each fairseq-train start, "all": whether it did for the whole run}} for the runs trained so (the
    driver's ``batches_per_epoch_from``: absent or None for a run trained wholly before the rule
    changed)."""
    out = {}
    for r in records:
        start = r.get("batches_per_epoch_from")
        if start is None:
            out[str(r["seed"])] = {"up_to": r["curve"][-1]["update"], "all": True}
        elif start > 0:
            out[str(r["seed"])] = {"up_to": start, "all": False}
    return out


def summarise_row(row: str, seeds: dict) -> dict:
    records = [seeds[s] for s in sorted(seeds)]
    return {
        "label": ROWS[row]["label"],
        "seeds": sorted(seeds),
        "test": {m: mean_sd([r["test"][m] for r in records]) for m in METRICS},
        "valid_rouge1": mean_sd([r["valid"]["rouge1"] for r in records]),
        "valid_set": records[0]["valid_set"],
        "chosen_update": [r["chosen_update"] for r in records],
        "chosen_lenpen": [r["chosen_lenpen"] for r in records],
        "lenpen_of_converged": lenpen_of_converged(records),
        "stopped": [r["stopped"] for r in records],
        "test_distinct": [r["test_distinct"] for r in records],
        "test_sentences": records[0]["test_sentences"],
        "lr": sorted({r["recipe"]["lr"] for r in records}),
        "patience": records[0]["settings"]["patience"],
        "chunk": records[0]["settings"]["chunk"],
        "caps": [r["settings"]["max_updates"] for r in records],
        "cost": cost_by_machine(records),
        "curves": {
            str(r["seed"]): [[p["update"], p["rouge1"]] for p in r["curve"]] for r in records
        },
        "batches_cut_per_start": batches_cut_per_start(records),
        "wall_seconds": round(sum(r["wall_seconds"] for r in records), 1),
        "commands": records[0]["commands"],
        "pretraining": records[0].get("pretraining"),
    }


def pretraining_summary(path: Path, record: dict) -> dict:
    """What the page says of the span pre-training ``record`` read from ``path``
    (``runs/pretrain-pN.json``, or one a later pre-training replaced, in
    ``runs/superseded/pretraining/``)."""
    curve = record["train_loss_curve"]
    return {
        **{
            k: record[k]
            for k in (
                "ngram",
                "updates",
                "command",
                "corpus",
                "wall_seconds",
                "sessions",
                "hardware",
            )
        },
        "record": rel(path),
        "checkpoint_sha256": record.get("checkpoint_sha256"),
        **({"loss_first": curve[0], "loss_last": curve[-1]} if curve else {}),
    }


def logged_loss_against(replaced: list, kept: list) -> dict:
    """A replaced pre-training's loss curve against the kept one's of its n: ``{"same_updates": N}``
    when the two are the same update for update (the same seed and corpus retrace one trajectory,
    as far as the log shows; a checkpoint's bytes are not kept to compare), ``{"departs_at": U}``
    at the first update both logged with another loss, else ``{}`` (one logged none, or one logged
    more of the same)."""
    if kept and kept == replaced:
        return {"same_updates": len(kept)}
    losses = {p["update"]: p["loss"] for p in kept}
    departs = [
        p["update"] for p in replaced if p["update"] in losses and losses[p["update"]] != p["loss"]
    ]
    return {"departs_at": departs[0]} if departs else {}


def earlier_pretraining(seeds: dict, ngram: int, current: dict | None, replaced: dict) -> dict:
    """{seed: the replaced pre-training it was fine-tuned from (None when no record of it is kept)}
    for the runs of a pre-trained row of n = ``ngram`` that did not start from its current
    pre-training: the run's ``pretraining_sha256`` against the record's ``checkpoint_sha256``
    (None on both sides for the records kept before the driver wrote them)."""
    sha = current["checkpoint_sha256"] if current else None
    out = {}
    for seed, r in sorted(seeds.items()):
        started = r.get("pretraining_sha256")
        if started != sha:
            out[str(seed)] = next(
                (
                    name
                    for name, p in replaced.items()
                    if p["ngram"] == ngram and p["checkpoint_sha256"] == started
                ),
                None,
            )
    return out


def sentence_scores(runs: dict, row: str, lead8: list | None) -> tuple[np.ndarray, dict] | None:
    if row == "lead-8":
        return (np.array(lead8), {}) if lead8 is not None else None
    if row not in runs:
        return None
    seeds = runs[row]
    return np.mean([seeds[s]["test_sentence_rouge1"] for s in sorted(seeds)], axis=0), {
        s: seeds[s]["test"]["rouge1"] for s in seeds
    }


def verdict(delta: float, p: float, margin: float, t_p: float | None = None) -> str:
    """A decided claim's verdict from the mean difference, the bootstrap p of "the difference is
    other than ``margin``" (0: the two rows differ) and, where both rows have seeds, the t-test p
    paired by seed: a difference is established only when both tests find it (p < 0.05), as in
    the other tables; the sentences alone do not show what a new seed would do, nor a few seeds
    that agree in sign what the test sentences show."""
    if p >= 0.05 and margin:
        return f"not shown: not significantly more than {margin:g} points"
    if p >= 0.05:
        return (
            "not shown: significant across seeds, not over the test sentences"
            if t_p is not None and t_p < 0.05
            else "no significant difference"
        )
    if t_p is not None and t_p >= 0.05:
        return "not shown: significant over the test sentences, not across seeds"
    if delta > margin:
        return protocol.ESTABLISHED
    return protocol.OPPOSITE if not margin else f"no: significantly less than {margin:g} points"


def compare(runs: dict, lead8: list | None) -> list:
    sys.path.insert(0, str(protocol.ROOT / "reproduction" / "prophetnet"))
    from collect_gigaword import RESAMPLES, paired_bootstrap  # noqa: E402
    from scipy import stats

    out = []
    for row, base, claim, margin in CLAIMS:
        a, b = sentence_scores(runs, row, lead8), sentence_scores(runs, base, lead8)
        entry = {
            "row": row,
            "baseline": base,
            "claim": claim,
            **({"margin": margin} if margin else {}),
        }
        if a is None or b is None:
            entry.update(
                decided=False,
                verdict="not decided: "
                + " and ".join(x for x, y in ((row, a), (base, b)) if y is None)
                + " not run yet",
            )
            out.append(entry)
            continue
        delta = float(a[0].mean() - b[0].mean())
        p = paired_bootstrap(a[0], b[0] + margin)  # whether the difference is other than the margin
        entry.update(
            {
                "delta_rouge1": round(delta, 2),
                "bootstrap_p": round(p, 4),
                "resamples": RESAMPLES,
                "seeds": [len(runs[row]), len(runs[base]) if base in runs else 0],
            }
        )
        entry["at_a_cap"] = {
            x: seeds
            for x in (row, base)
            if x in runs
            and (
                seeds := sorted(
                    s for s, r in runs[x].items() if r["stopped"] != protocol.EARLY_STOPPED
                )
            )
        }
        common = sorted(set(a[1]) & set(b[1]))
        if len(common) >= 2:
            entry["t_test_p"] = round(
                float(
                    stats.ttest_rel(
                        [a[1][s] for s in common], [b[1][s] + margin for s in common]
                    ).pvalue
                ),
                4,
            )
        need = protocol.SEEDS_FOR_A_VERDICT
        short = [
            f"{x} has {len(runs[x])} of {need} seeds"
            for x in (row, base)
            if x in runs and len(runs[x]) < need
        ]
        entry["decided"] = not short
        entry["verdict"] = (
            "not decided: " + " and ".join(short)
            if short
            else verdict(delta, p, margin, entry.get("t_test_p"))
        )
        out.append(entry)
    return out


def plot(models: dict, lr_grid: dict, lead8_valid: float | None, out: Path) -> bool:
    """Valid ROUGE-1 by update: every kept run (solid, a colour per row), the ``--lr-grid`` probes
    of the row's rates (dashed, the row's colour) and lead-8 on the same pairs (dotted)."""
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colour = {row: f"C{i}" for i, row in enumerate(ROWS)}
    fig, ax = plt.subplots(figsize=(11, 4.5))
    for row, model in models.items():
        for j, (seed, curve) in enumerate(sorted(model["curves"].items())):
            ax.plot(
                *zip(*curve),
                marker="o",
                ms=3,
                color=colour[row],
                label=model["label"] if j == 0 else None,
            )
    for row, grid in lr_grid.items():
        for j, (lr, probe) in enumerate(sorted(grid["rates"].items())):
            ax.plot(
                *zip(*probe["curve"]),
                ls="--",
                lw=1,
                color=colour[row],
                label=f"{grid['label']}: lr-grid probes (seed 0)" if j == 0 else None,
            )
            ax.annotate(
                f"lr {lr}",
                probe["curve"][-1],
                xytext=(3, 0),
                textcoords="offset points",
                fontsize=6,
                color=colour[row],
                va="center",
            )
    if lead8_valid is not None:
        ax.axhline(lead8_valid, ls=":", color="black", label="lead-8 (no model)")
    ax.set(
        xlabel="fine-tuning updates",
        ylabel="valid ROUGE-1 F1 x 100 (beam 4, lenpen 1.0)",
        title="Gigaword 10k: every run until early stopping or its update cap",
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return True


def collect(kept: Path, results: dict, figure: Path | None) -> dict:
    runs = load_runs(kept)
    lead8_file = kept / "lead8-test.json"
    lead8 = (
        json.loads(lead8_file.read_text(encoding="utf-8"))["test_sentence_rouge1"]
        if lead8_file.is_file()
        else None
    )
    models = {row: summarise_row(row, runs[row]) for row in ROWS if row in runs}
    records = {
        path: json.loads(path.read_text(encoding="utf-8"))
        for path in sorted(kept.glob("pretrain-p*.json"))
    }
    pretraining = {path.stem: pretraining_summary(path, r) for path, r in records.items()}
    curves = {r["ngram"]: r["train_loss_curve"] for r in records.values()}
    replaced = {}
    for path in sorted((kept / "superseded" / "pretraining").glob("*.json")):
        r = json.loads(path.read_text(encoding="utf-8"))
        replaced[path.stem] = {
            **pretraining_summary(path, r),
            "logged_loss": logged_loss_against(r["train_loss_curve"], curves.get(r["ngram"], [])),
        }
    for row, m in models.items():
        if ROWS[row].get("pretrain"):
            n = ROWS[row]["ngram"]
            m["earlier_pretraining"] = earlier_pretraining(
                runs[row], n, pretraining.get(f"pretrain-p{n}"), replaced
            )
    lr_grid: dict = {}
    for path in sorted((kept / "lr-grid").glob("*.json")):
        probe = json.loads(path.read_text(encoding="utf-8"))
        best = next(c for c in probe["curve"] if c["update"] == probe["chosen_update"])
        grid = lr_grid.setdefault(probe["row"], {"label": ROWS[probe["row"]]["label"], "rates": {}})
        grid["rates"][probe["lr"]] = {
            "valid_rouge1": probe["valid"]["rouge1"],
            "chosen_update": probe["chosen_update"],
            "distinct": best["distinct"],
            "seeds": [probe["seed"]],
            "stopped": [probe["stopped"]],
            "patience": probe["settings"]["patience"],
            "caps": [probe["settings"]["max_updates"]],
            "curve": [[c["update"], c["rouge1"]] for c in probe["curve"]],
            "batches_cut_per_start": batches_cut_per_start([probe]),
        }
    superseded = []  # runs made before the grid chose another rate for their row: out of the table
    for path in sorted((kept / "superseded").glob("*-s*.json")):
        r = json.loads(path.read_text(encoding="utf-8"))
        superseded.append(
            {
                "record": rel(path),
                "label": ROWS[r["row"]]["label"],
                "seed": r["seed"],
                "lr": r["settings"]["lr"],
                "valid_rouge1": r["valid"]["rouge1"],
                "test_rouge1": r["test"]["rouge1"],
                "test_distinct": r["test_distinct"],
                "batches_cut_per_start": batches_cut_per_start([r]),
            }
        )
    results = {
        **results,
        "models": models,
        "pretraining": pretraining,
        "replaced_pretraining": replaced,
        "lr_grid": lr_grid,
        "superseded": superseded,
        "comparisons": compare(runs, lead8) if models else [],
    }
    results.pop("source_reliance", None)
    if (kept / "source-reliance.json").is_file():  # reproduction/gigaword_10k/source_reliance.py
        results["source_reliance"] = json.loads(
            (kept / "source-reliance.json").read_text(encoding="utf-8")
        )
    results.pop("figure", None)
    whole_valid1k = all(
        m["valid_set"] == "valid1k (1000 pairs)" for m in models.values()
    )  # lead-8's pairs
    lead8_valid = (
        results.get("lead", {}).get("valid", {}).get("valid1k", {}).get("8", {}).get("rouge1")
        if whole_valid1k
        else None
    )
    if models and figure is not None and plot(models, lr_grid, lead8_valid, figure):
        results["figure"] = (
            str(figure.relative_to(protocol.PAGE.parent))
            if figure.is_relative_to(protocol.PAGE.parent)
            else str(figure)
        )
    return results


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m reproduction.gigaword_10k.collect",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--kept", type=Path, default=KEPT, help="the driver's kept runs")
    p.add_argument(
        "--results", type=Path, default=protocol.RESULTS, help="the results file (lead part kept)"
    )
    p.add_argument("--page", type=Path, default=protocol.PAGE)
    p.add_argument(
        "--figure", type=Path, default=FIGURE, help="the curves figure (needs matplotlib)"
    )
    a = p.parse_args(argv)
    results = collect(a.kept, json.loads(a.results.read_text(encoding="utf-8")), a.figure)
    a.results.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    write_between_markers(a.page, page.markdown(results), protocol.START, protocol.END)
    write_between_markers(a.page, page.summary(results), *protocol.SUMMARY_MARKERS)
    print(
        f"{len(results['models'])} model rows "
        f"({sum(len(m['seeds']) for m in results['models'].values())} runs); wrote {a.results}, "
        f"the block and the summary of {a.page}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()

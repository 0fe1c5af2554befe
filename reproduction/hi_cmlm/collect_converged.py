"""The section "Table 1 at convergence" of docs/results/hi-cmlm.md and ``KEPT/results.json``, from
the runs that ``reproduction.hi_cmlm.converge`` kept (one JSON per run in ``KEPT``).

    python -m reproduction.hi_cmlm.collect_converged [--kept reproduction/hi_cmlm/converged]
        [--ref VAL_DE] [--page docs/results/hi-cmlm.md]

The section says which runs exist and how each stopped (early stopping, or the cap: not
converged); the table and tests are today's Table 1's (``collect_results``: BLEU after passes
1/2/4/10, by reference length, seed-paired t-tests and sacreBLEU's paired bootstrap per seed and
pooled against CMLM), with the autoregressive teacher's row of the 600-update table (the same
teacher on the same val). No claim is decided until every row has ``SEEDS_FOR_A_VERDICT`` seeds
stopped by their patience; until then its numbers are given as numbers so far. Without ``--ref``
(the raw German val) the bootstrap keeps the p-values of the results file it replaces.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from fairseq_ext.common.errors import FairseqExtError
from reproduction.convergence import EARLY_STOPPED, SEEDS_FOR_A_VERDICT, rel
from reproduction.hi_cmlm import collect_results
from reproduction.hi_cmlm.converge import KEPT, LENGTH_BEAM, PASSES, ROWS, parser
from reproduction.records import ROOT, write_json
from reproduction.results_page import write_between_markers

PAGE = ROOT / "docs" / "results" / "hi-cmlm.md"
RESULTS = KEPT / "results.json"  # the committed one; a --kept folder holds its own
MARKERS = ("<!-- table1-converged:start -->", "<!-- table1-converged:end -->")
STATUS_FIELDS = (  # what the page says of each kept run
    "row",
    "seed",
    "stopped",
    "chosen_update",
    "chosen_length_offset",
    "valid_outside_sample",
    "test_sample",
)
EARLY_TABLE = ROOT / "reproduction" / "hi_cmlm" / "results.json"  # the 600-update table
COMMAND = "python -m reproduction.hi_cmlm.converge --multi30k data/multi30k"


def records(kept: Path) -> list[dict]:
    """The kept runs, row by row in the driver's order, then by seed."""
    found = [json.loads(p.read_text(encoding="utf-8")) for p in kept.glob("*-s*.json")]
    return sorted(found, key=lambda r: (list(ROWS).index(r["row"]), r["seed"]))


def table_runs(kept_runs: list[dict]) -> dict:
    """collect_results' ``runs`` (row key -> seed -> decoding) of the Table 1 rows, with the
    teacher's row of the 600-update table."""
    runs: dict[str, dict] = {}
    for r in kept_runs:
        if r["row"] == "student":
            continue
        for key, decoding in r["decodings"].items():
            runs.setdefault(key, {})[str(r["seed"])] = {**decoding, "stopped": r["stopped"]}
    if runs and EARLY_TABLE.is_file():
        teacher = json.loads(EARLY_TABLE.read_text(encoding="utf-8"))["runs"].get("ar_teacher")
        if teacher:
            runs["ar_teacher"] = teacher
    return runs


def status(kept_runs: list[dict], rows: list[str]) -> tuple[str, bool]:
    """Which runs exist and how each stopped; whether every row has enough seeds for a verdict."""
    lines, decided = [], True
    for row in rows:
        mine = [r for r in kept_runs if r["row"] == row]
        converged = [r["seed"] for r in mine if r["stopped"] == EARLY_STOPPED]
        capped = [r["seed"] for r in mine if r["stopped"] != EARLY_STOPPED]
        decided &= len(converged) >= SEEDS_FOR_A_VERDICT
        parts = []
        if converged:
            parts.append(f"converged (stopped by patience): seeds {', '.join(map(str, converged))}")
        if capped:
            parts.append(f"stopped by the cap, not converged: seeds {', '.join(map(str, capped))}")
        lines.append(f"- {ROWS[row]['label']}: " + ("; ".join(parts) or "no finished run") + ".")
    return "\n".join(lines), decided


def student_table(kept_runs: list[dict]) -> str:
    students = [r for r in kept_runs if r["row"] == "student"]
    if not students:
        return ""
    lines = [
        "| student seed | stopped | best update | length offset (chosen on val) | BLEU val "
        "outside the sample | BLEU test sample |",
        "|---|---|---|---|---|---|",
    ]
    for r in students:
        sample = r["test_sample"]["bleu"] if r["test_sample"] else "-"
        lines.append(
            f"| {r['seed']} | {r['stopped']} | {r['chosen_update']} | {r['chosen_length_offset']} "
            f"| {r['valid_outside_sample']['bleu']:.2f} | {sample} |"
        )
    return "\n".join(lines)


def render(results: dict) -> str:
    """The page's block from a results file: the runs, then the table, the student and what they
    show, or that no run has finished."""
    kept_runs, summary = results["kept_runs"], results["summary"]
    d = parser()
    head = (
        f"`{COMMAND}` (the protocol is in the driver's docstring; by default chunks of "
        f"{d.get_default('chunk')} updates, validation BLEU on Multi30k val after each with "
        f"{PASSES} passes and length beam {LENGTH_BEAM}, a patience of "
        f"{d.get_default('patience')} validations, a cap of {d.get_default('max_updates')} "
        f"updates). Each finished run is one JSON in `{rel(KEPT)}/` with its hypotheses; the "
        "checkpoint of every row is chosen on val, where it is scored.\n\n"
    )
    if not kept_runs:
        return (
            head
            + "**No run has finished yet**: there are no numbers here, and no claim is decided "
            f"until every row has {SEEDS_FOR_A_VERDICT} seeds stopped by their patience.\n"
        )
    runs_status, decided = status(kept_runs, list(ROWS))
    verdicts = (
        f"Every row has {SEEDS_FOR_A_VERDICT} converged seeds: the claims are decided by the rules "
        "of the 600-update table (p < 0.05):"
        if decided
        else f"**No claim is decided yet**: a claim waits until every row has "
        f"{SEEDS_FOR_A_VERDICT} seeds stopped by their patience; the numbers so far:"
    )
    parts = [head + "Runs:\n\n" + runs_status]
    if summary:
        parts.append(collect_results.markdown(summary))
    student = student_table(kept_runs)
    if student:
        parts.append(student)
    if collect_results.BASELINE in summary and set(collect_results.STRATEGY_ROWS) & set(summary):
        parts.append(verdicts + "\n\n" + collect_results.findings(summary).rstrip("\n"))
    elif summary:
        parts.append(verdicts + " none until CMLM and HI-CMLM both have a finished run.")
    return "\n\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m reproduction.hi_cmlm.collect_converged",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--kept", type=Path, default=KEPT)
    p.add_argument("--ref", type=Path, help="the raw German val (for the bootstrap)")
    p.add_argument("--page", type=Path, default=PAGE)
    a = p.parse_args(argv)
    if a.ref is not None and not a.ref.is_file():
        p.error(f"--ref {a.ref} does not exist")
    kept_runs = records(a.kept)
    runs = table_runs(kept_runs)
    results_file = a.kept / "results.json"
    before = (
        json.loads(results_file.read_text(encoding="utf-8")).get("summary", {})
        if results_file.is_file()
        else {}
    )
    summary = {}
    if runs:
        with tempfile.TemporaryDirectory() as tmp:
            tests = (
                collect_results.significance(Path(tmp), a.ref, runs, ROOT, before)
                if a.ref
                else {
                    k: {t: v for t, v in row.items() if "paired" in t} for k, row in before.items()
                }
            )
        summary = collect_results.summarise(runs, tests)
    results = {
        "kept_runs": [{k: r[k] for k in STATUS_FIELDS if k in r} for r in kept_runs],
        "runs": runs,
        "summary": summary,
    }
    write_json(results_file, results)
    try:
        write_between_markers(a.page, render(results), *MARKERS)
    except FairseqExtError as e:
        sys.exit(f"error: {e}")
    print(f"wrote the section 'Table 1 at convergence' of {rel(a.page)}", flush=True)


if __name__ == "__main__":
    main()

"""Run the benchmarks side by side and publish their ratios.

    python -m reproduction.benchmarks.run [--only NAME ...] [--device cpu|cuda] [--quick] [--out
    DIR] [--allow-load]

Each module named in ``BENCHMARKS`` has ``run(device: str, quick: bool) -> dict`` that
returns ``{"metrics": {name: value}, "details": {...}, "hardware": "..."}``, measured with
the harness of ``benchmarks/common.py``: every ratio within one process, both sides on the
same batches, interleaved, so machine load affects both alike. Results go to
``benchmarks/results/{cpu,gpu}.json`` (merged with earlier results of modules not re-run),
to the table between the ``bench:start``/``bench:end`` markers of docs/results/speed.md, to
the table of the mask-predict decoding rows (``hicmlm``) between its
``maskpredict-rows:start``/``maskpredict-rows:end`` markers, and to the figures
``benchmarks/results/speed.png`` and ``maskpredict_speedup.png`` (``benchmarks/plot.py``).
``--quick`` (fewer repetitions, noisier: a check that the benchmarks run) writes to ``--out``,
a new temporary folder unless given; only a run into ``benchmarks/results`` updates the tables.

A CPU run into ``benchmarks/results`` refuses to start when the 1-minute load average exceeds
0.5 (``MAX_START_LOAD``): none of the bench's own threads runs yet (its one thread has only
imported its modules for a few seconds), so a quiet machine reads near 0, and more than 0.5
means that something else kept half a core busy over the last minute: another job shares
the cores, and every timing would carry its load (a machine that just finished a job reads
above it for a minute or two: wait). ``--allow-load`` publishes anyway; each module's
result then says so (``allow_load``), and so do the tables. Every result records the load
average at the start (``load_at_start``). A CUDA run (the GPU machine's own modules run back
to back, each starting under its predecessor's load) records it without refusing.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import re
import tempfile
import time
from pathlib import Path

import torch

from fairseq_ext.common.errors import FairseqExtError
from reproduction.benchmarks import frontier
from reproduction.benchmarks.common import ROOT, hardware, load_average
from reproduction.benchmarks.plot import (
    decode_rows,
    load_results,
    plot_maskpredict_speedup,
    plot_ratios,
)
from reproduction.results_page import write_between_markers

RESULTS = ROOT / "reproduction" / "benchmarks" / "results"
BENCHMARKS = ["hicmlm", "frontier", "prophetnet", "posmask", "unilm"]
START, END = "<!-- bench:start -->", "<!-- bench:end -->"
ROWS_START, ROWS_END = "<!-- maskpredict-rows:start -->", "<!-- maskpredict-rows:end -->"
SUMMARY_START, SUMMARY_END = "<!-- bench-summary:start -->", "<!-- bench-summary:end -->"
FRONTIER_START, FRONTIER_END = "<!-- frontier:start -->", "<!-- frontier:end -->"
# (family, benchmark, our training-rate metric, the reference's, unit, our memory name, the
# reference's)
SUMMARY = [
    (
        "HI-CMLM vs fairseq `cmlm_transformer`",
        "hicmlm",
        "hicmlm_train_tokens_per_s",
        "cmlm_train_tokens_per_s",
        "tokens/s",
        "hicmlm",
        "cmlm",
    ),
    (
        "position-masked RoBERTa vs fairseq `roberta`",
        "posmask",
        "posmask_train_tokens_per_s",
        "roberta_train_tokens_per_s",
        "tokens/s",
        "position_masked_roberta",
        "roberta",
    ),
    (
        "ProphetNet n=2 vs fairseq `transformer`",
        "prophetnet",
        "prophetnet_train_target_tokens_per_s",
        "transformer_train_target_tokens_per_s",
        "target tokens/s",
        "prophetnet",
        "transformer",
    ),
    (
        "UniLM vs fairseq `transformer`",
        "unilm",
        "unilm_train_target_tokens_per_s",
        "transformer_train_target_tokens_per_s",
        "target tokens/s",
        "unilm",
        "transformer",
    ),
]
MAX_START_LOAD = (
    0.5  # the 1-minute load average above which a CPU run refuses to publish (the docstring)
)
# (header, key, format) of the columns of the decoding rows' table
ROW_COLUMNS = [
    ("batch", "batch", "d"),
    ("passes", "passes", "d"),
    ("length beam", "length_beam", "d"),
    ("teacher beam", "teacher_beam", "d"),
    ("speed-up", "speedup", ".2f"),
    ("student sentences/s", "student_sentences_per_s", ".1f"),
    ("teacher sentences/s", "teacher_sentences_per_s", ".1f"),
    ("student tokens/s", "student_tokens_per_s", ".0f"),
    ("teacher tokens/s", "teacher_tokens_per_s", ".0f"),
    ("student BLEU", "student_bleu", ".2f"),
    ("teacher BLEU", "teacher_bleu", ".2f"),
    ("load before", "load_before", ".2f"),
    ("load after", "load_after", ".2f"),
    ("note", "note", ""),
]


def allowed_load(kind: str, bench: str, out: dict) -> str:
    """The line that says a module's result was published with ``--allow-load``."""
    return (
        f"{kind} `{bench}` was published with `--allow-load`: 1-minute load average "
        f"{out['load_at_start']:.2f} at the start, above {MAX_START_LOAD} (another job shared "
        "the cores)."
    )


def render_table(results: dict) -> str:
    rows = ["| benchmark | metric | value | goal | hardware |", "|---|---|---|---|---|"]
    for kind in ("cpu", "gpu"):
        res = results.get(kind)
        if not res:
            continue
        for bench, out in res["benchmarks"].items():
            goals = out.get("goals", {})
            for name, value in out["metrics"].items():
                shown = f"{value:.3f}" if isinstance(value, float) else str(value)
                hw = out.get("hardware", res["hardware"])  # a module may run with other settings
                rows.append(f"| {bench} | `{name}` | {shown} | {goals.get(name, '')} | {hw} |")
    notes = [
        allowed_load(kind, bench, out)
        for kind in ("cpu", "gpu")
        for bench, out in results.get(kind, {}).get("benchmarks", {}).items()
        if out.get("allow_load")
    ]
    return "\n".join(rows + ([""] + notes if notes else []))


PROVENANCE = {
    "cpu": "`make bench` (`python -m reproduction.benchmarks.run`)",
    "gpu": (
        "`make gpu-check PART=bench` on one {hardware}, published with `python -m "
        "reproduction.gpu.publish`"
    ),
}


def provenance(kind: str, out: dict) -> str:
    """Where a results file's rows come from: the call, the date and torch (each row names its
    machine)."""
    how = PROVENANCE[kind].format(hardware=out.get("hardware", "GPU"))
    when = ", ".join(
        part
        for part in (out.get("date"), f"torch {out['torch']}" if out.get("torch") else None)
        if part
    )
    return (
        f"{kind.upper()} rows: {how}"
        + (f", {when}" if when else "")
        + f": `reproduction/benchmarks/results/{kind}.json`."
    )


def render_summary(results: dict) -> str:
    """One row per family and results file: training rate and peak training memory, ours beside
    the fairseq reference's (the metrics of the full table below)."""
    rows = [
        "| family | hardware | training rate, ours vs reference | ratio | peak training memory "
        "(MB), ours vs reference |",
        "|---|---|---|---:|---|",
    ]
    for kind in ("cpu", "gpu"):
        for family, bench, ours, theirs, unit, our_mem, their_mem in SUMMARY:
            out = results.get(kind, {}).get("benchmarks", {}).get(bench)
            if not out or ours not in out["metrics"]:
                continue
            m = out["metrics"]
            memory = "rss" if kind == "cpu" else "cuda"
            mem = (
                f"{m[f'train_peak_{memory}_mb_{our_mem}']:,.0f} vs "
                f"{m[f'train_peak_{memory}_mb_{their_mem}']:,.0f}"
                if f"train_peak_{memory}_mb_{our_mem}" in m
                else ""
            )
            rows.append(
                f"| {family} | {out.get('hardware', results[kind]['hardware'])} | {m[ours]:,.0f} "
                f"vs {m[theirs]:,.0f} {unit} | {m[ours] / m[theirs]:.3f} | {mem} |"
            )
    return (
        "\n".join(rows)
        + "\n"
        + "".join(
            f"\n{provenance(kind, results[kind])}\n" for kind in PROVENANCE if kind in results
        )
    )


def speedup_goals(out: dict) -> str:
    """One sentence: each mask-predict speed-up that has a goal, met or not (none: a run from before
    the goals were recorded)."""
    parts = []
    for name, goal in out.get("goals", {}).items():
        found = re.fullmatch(r"maskpredict_vs_ar_speedup_b(\d+)_T(\d+)", name)
        if found and name in out["metrics"]:
            value, bound = out["metrics"][name], float(goal.split()[-1])
            parts.append(
                f"batch {found[1]} with {found[2]} passes {value:.2f}x (goal {goal}: "
                f"{'met' if value >= bound else 'not met'})"
            )
    return (
        "Goals (length beam 1 over the teacher's beam 5): " + "; ".join(parts) + "."
        if parts
        else ""
    )


def render_rows(results: dict) -> str:
    """The block of the mask-predict decoding rows: a table per results file that has them
    (``plot.decode_rows``), with the figure; one line saying how to measure them otherwise."""
    measured = decode_rows(results)
    if not measured:
        return (
            "The rows have not been measured yet: `python -m reproduction.benchmarks.run --only "
            "hicmlm` on a quiet machine measures them.\n"
        )
    parts = []
    for kind, out in measured.items():
        start = (
            f", 1-minute load average {out['load_at_start']:.2f} at the start"
            if "load_at_start" in out
            else ""
        )
        layout = (
            f"{out['details']['student_layout']}, " if "student_layout" in out["details"] else ""
        )
        head = (
            f"{kind.upper()}, {out.get('hardware', results[kind]['hardware'])}{start}; "
            f"student {layout}SHA-256 `{out['details']['student_sha256']}`."
        )
        lines = [
            head,
            "",
            "| " + " | ".join(name for name, _, _ in ROW_COLUMNS) + " |",
            "|" + "---|" * len(ROW_COLUMNS),
        ]
        for row in out["details"]["decode_rows"]:
            lines.append(
                "| " + " | ".join(format(row[key], fmt) for _, key, fmt in ROW_COLUMNS) + " |"
            )
        if any("teacher_input" not in row for row in out["details"]["decode_rows"]):
            lines += [
                "",
                "Measured before issue 76: the teacher was given the student's input format "
                "(`<s>` in front), not its own, which costs it BLEU; its columns are not its "
                "own speed and quality (the [bench against "
                "CTranslate2](#mask-predict-against-the-engine-users-deploy-issue-76) gives "
                "each model its own input).",
            ]
        if speedup_goals(out):
            lines += ["", speedup_goals(out)]
        if out.get("allow_load"):
            lines += ["", allowed_load(kind, "hicmlm", out)]
        parts.append("\n".join(lines) + "\n")
    parts.append(
        "![Mask-predict speed-up against batch "
        "size](../../reproduction/benchmarks/results/maskpredict_speedup.png)\n"
    )
    return "\n".join(parts)


def render_frontier(results: dict) -> str:
    """The block of the decoding bench against CTranslate2 (``frontier.render``), with its
    figure."""
    out = results.get("cpu", {}).get("benchmarks", {}).get("frontier")
    if not out:
        return (
            "Not measured yet: `python -m reproduction.benchmarks.run --only frontier` on a "
            "quiet machine measures it.\n"
        )
    return (
        frontier.render(out)
        + ("\n" + allowed_load("cpu", "frontier", out) + "\n" if out.get("allow_load") else "")
        + "\n![BLEU against sentences/s](../../reproduction/benchmarks/results/frontier.png)\n"
    )


DECODING_SPEED = ("<!-- decoding-speed:start -->", "<!-- decoding-speed:end -->")


def update_pages(results: dict) -> None:
    """The generated blocks of docs/results/speed.md (a page without one keeps its text there),
    its decoding-speed summary lines (``frontier.summary``) once the frontier is measured."""
    out = results.get("cpu", {}).get("benchmarks", {}).get("frontier")
    if out:
        write_between_markers(
            ROOT / "docs" / "results" / "speed.md", frontier.summary(out), *DECODING_SPEED
        )
    for block, start, end in (
        (render_summary(results), SUMMARY_START, SUMMARY_END),
        (render_table(results) + "\n", START, END),
        (render_rows(results), ROWS_START, ROWS_END),
        (render_frontier(results), FRONTIER_START, FRONTIER_END),
    ):
        try:
            write_between_markers(ROOT / "docs" / "results" / "speed.md", block, start, end)
        except FairseqExtError:
            continue


def benchmark(name: str):
    """The module of benchmark ``name`` (its ``run(device, quick)``)."""
    return importlib.import_module(f"reproduction.benchmarks.{name}")


def main(argv: list[str] | None = None) -> None:
    from fairseq_ext.common.errors import require

    p = argparse.ArgumentParser(
        prog="python -m reproduction.benchmarks.run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--only", nargs="+", choices=BENCHMARKS, help="run only these benchmarks")
    p.add_argument(
        "--device",
        choices=["cpu", "cuda"],
        default="cpu",
        help="where the models run (default: cpu)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="fewer repetitions (a smoke run, noisier), written to --out, not to the published "
        "results",
    )
    p.add_argument(
        "--out",
        type=Path,
        help="folder of the results (default: benchmarks/results; with --quick, "
        "a new temporary folder)",
    )
    p.add_argument(
        "--allow-load",
        action="store_true",
        help="publish into benchmarks/results even when the 1-minute load average at the start "
        f"is above {MAX_START_LOAD} (another job shares the cores); the results and the tables "
        "say so",
    )
    args = p.parse_args(argv)
    require(
        args.device != "cuda" or torch.cuda.is_available(),
        "--device cuda, but torch.cuda.is_available() is false (a CPU build of torch, or no GPU "
        "visible): run with --device cpu, or on a machine with a GPU and a CUDA build of torch",
    )
    logging.getLogger().setLevel(logging.WARNING)
    out_dir = args.out or (
        Path(tempfile.mkdtemp(prefix="fairseq_ext_bench_quick_")) if args.quick else RESULTS
    )
    published = out_dir.resolve() == RESULTS.resolve()
    start_load = load_average()
    loaded = published and args.device == "cpu" and start_load > MAX_START_LOAD
    require(
        not loaded or args.allow_load,
        f"1-minute load average {start_load:.2f} > {MAX_START_LOAD} before the bench started: "
        "another job shares the cores and every timing would carry its load; wait until the "
        "machine is quiet, or pass --allow-load to publish anyway (the results file and "
        "docs/results/speed.md then say so)",
    )
    kind = "gpu" if args.device == "cuda" else "cpu"
    out_dir.mkdir(parents=True, exist_ok=True)
    out_path = out_dir / f"{kind}.json"
    previous = json.loads(out_path.read_text()) if out_path.exists() else {"benchmarks": {}}
    merged = {
        "hardware": hardware(args.device),
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"),
        "benchmarks": dict(previous.get("benchmarks", {})),
    }
    for name in args.only or BENCHMARKS:
        module = benchmark(name)
        print(
            f"{name:12s} started at {time.strftime('%H:%M:%S')}, 1-minute load average "
            f"{load_average():.2f}",
            flush=True,
        )
        t0 = time.time()
        result = module.run(args.device, args.quick)
        result["seconds"] = round(time.time() - t0, 1)
        result["load_at_start"] = round(start_load, 2)
        if loaded:
            result["allow_load"] = True
        merged["benchmarks"][name] = result
        for metric, value in result["metrics"].items():
            print(f"{name:12s} {metric:45s} {value}", flush=True)
        print(f"{name:12s} done in {result['seconds']:.0f} s", flush=True)
    out_path.write_text(json.dumps(merged, indent=2) + "\n")
    results = load_results(out_dir)
    figures = [out_dir / "speed.png"] if plot_ratios(results, out_dir / "speed.png") else []
    if plot_maskpredict_speedup(results, out_dir / "maskpredict_speedup.png"):
        figures.append(out_dir / "maskpredict_speedup.png")
    if frontier.plot(
        results.get(kind, {}).get("benchmarks", {}).get("frontier", {}), out_dir / "frontier.png"
    ):
        figures.append(out_dir / "frontier.png")
    if published:
        update_pages(results)
    print(
        f"wrote {', '.join(map(str, [out_path, *figures]))}"
        + (" and the tables of docs/results/speed.md" if published else "")
    )


if __name__ == "__main__":
    from fairseq_ext.fairseq_changes.one_line_errors import install_cli_excepthook

    install_cli_excepthook()
    main()

"""Every published table is what its results file renders: each generated block of a results
page equals, byte for byte, the collector's ``markdown`` of the committed results file (the
numbers cannot drift from the file, and moving the machinery changed no table)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

sys.path.insert(
    0, str(ROOT / "reproduction" / "prophetnet")
)  # its scripts import each other by name
import batch_stats  # noqa: E402
import collect_gigaword  # noqa: E402

from reproduction.benchmarks import frontier  # noqa: E402
from reproduction.benchmarks.plot import load_results  # noqa: E402
from reproduction.benchmarks.run import render_frontier, render_rows, render_summary, render_table  # noqa: E402
from reproduction.gigaword_10k import page, protocol  # noqa: E402
from reproduction.gpu import publish, rehearse  # noqa: E402
from reproduction.hi_cmlm import (
    collect_converged,
    collect_quickstart,
    collect_results,
    collect_shipped,
    gap_significance,  # noqa: E402
    length_offset,
    student_layouts,
)
from reproduction.position_masking import collect_glue, collect_glue_full, collect_minilm  # noqa: E402
from reproduction.position_masking import plot as sweep_plot

REPRO = ROOT / "reproduction"


def block(page: str, name: str) -> str:
    text = (ROOT / page).read_text(encoding="utf-8")
    return text.split(f"<!-- {name}:start -->\n", 1)[1].split(f"<!-- {name}:end -->", 1)[0]


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def load_rouge_summary(path: Path) -> dict:
    """A table-2 style summary as the collector holds it: JSON wrote its update keys as text."""
    summary = load(path)
    for model in summary["models"].values():
        model["points"] = {int(u): row for u, row in model["points"].items()}
    return summary


TABLES = {
    "table1": (
        "docs/results/hi-cmlm.md",
        lambda: (
            collect_results.markdown(load(REPRO / "hi_cmlm" / "results.json")["summary"]) + "\n"
        ),
    ),
    "table1-findings": (
        "docs/results/hi-cmlm.md",
        lambda: collect_results.findings(load(REPRO / "hi_cmlm" / "results.json")["summary"]),
    ),
    "table1-converged": (
        "docs/results/hi-cmlm.md",
        lambda: collect_converged.render(load(collect_converged.RESULTS)),
    ),
    "shipped": (
        "docs/results/hi-cmlm.md",
        lambda: collect_shipped.markdown(load(REPRO / "hi_cmlm" / "shipped.json")),
    ),
    "student-layouts": (
        "docs/results/hi-cmlm.md",
        lambda: student_layouts.markdown(load(REPRO / "hi_cmlm" / "student_layouts.json")),
    ),
    "quickstart": (
        "docs/results/hi-cmlm.md",
        lambda: collect_quickstart.page_block(
            load(collect_quickstart.QUICKSTART),
            load(collect_quickstart.SHIPPED),
            load(collect_quickstart.BENCH)["benchmarks"]["hicmlm"],
            collect_quickstart.lr_runs(),
        ),
    ),
    "quickstart-summary": (
        "README.md",
        lambda: collect_quickstart.readme_line(
            load(collect_quickstart.QUICKSTART), load(collect_quickstart.SHIPPED)
        ),
    ),
    "table2": (
        "docs/results/prophetnet.md",
        lambda: collect_gigaword.markdown(
            load_rouge_summary(REPRO / "prophetnet" / "results.json")
        ),
    ),
    "bisection": (
        "docs/results/prophetnet.md",
        lambda: collect_gigaword.bisection_markdown(load(REPRO / "prophetnet" / "bisection.json")),
    ),
    "batches": (
        "docs/results/prophetnet.md",
        lambda: batch_stats.markdown(load(REPRO / "prophetnet" / "batch_stats.json")),
    ),
    "table3-sweep": (
        "docs/results/position-masking.md",
        lambda: sweep_plot.markdown(load(REPRO / "position_masking" / "results" / "results.json")),
    ),
    "table3-minilm": (
        "docs/results/position-masking.md",
        lambda: collect_minilm.markdown(
            load(REPRO / "position_masking" / "results" / "minilm.json")
        ),
    ),
    "table3-glue": (
        "docs/results/position-masking.md",
        lambda: collect_glue.markdown(load(REPRO / "position_masking" / "results" / "glue.json")),
    ),
    "table3-glue-summary": (
        "docs/results/position-masking.md",
        lambda: collect_glue.page_summary(
            load(REPRO / "position_masking" / "results" / "glue.json")
        ),
    ),
    "unilm-pretrained": (
        "docs/results/unilm.md",
        lambda: collect_gigaword.markdown(
            load_rouge_summary(REPRO / "unilm" / "pretrained_results.json")
        ),
    ),
    "bench-summary": (
        "docs/results/speed.md",
        lambda: render_summary(load_results(REPRO / "benchmarks" / "results")),
    ),
    "bench": (
        "docs/results/speed.md",
        lambda: render_table(load_results(REPRO / "benchmarks" / "results")) + "\n",
    ),
    "maskpredict-rows": (
        "docs/results/speed.md",
        lambda: render_rows(load_results(REPRO / "benchmarks" / "results")),
    ),
    "length-offset": (
        "docs/results/speed.md",
        lambda: length_offset.render(load(REPRO / "hi_cmlm" / "length_offset.json")),
    ),
    "gap-significance": (
        "docs/results/speed.md",
        lambda: gap_significance.render(load(REPRO / "hi_cmlm" / "gap_significance.json")),
    ),
    "decoding-speed": (
        "docs/results/speed.md",
        lambda: frontier.summary(
            load_results(REPRO / "benchmarks" / "results")["cpu"]["benchmarks"]["frontier"]
        ),
    ),
    "frontier": (
        "docs/results/speed.md",
        lambda: render_frontier(load_results(REPRO / "benchmarks" / "results")),
    ),
    "gpu-rehearsal": (
        "docs/gpu.md",
        lambda: rehearse.render(load(REPRO / "gpu" / "rehearsal.json")),
    ),
    "gpu-check": ("docs/gpu.md", lambda: publish.render_block(publish.published())),
    "table3-glue-full": (
        "docs/results/position-masking.md",
        lambda: collect_glue_full.markdown(load(collect_glue_full.SUMMARY)),
    ),
    "table3-glue-full-summary": (
        "docs/results/position-masking.md",
        lambda: collect_glue_full.page_summary(load(collect_glue_full.SUMMARY)),
    ),
    "gigaword-10k": ("docs/results/gigaword-10k.md", lambda: page.markdown(load(protocol.RESULTS))),
    "gigaword-10k-summary": (
        "docs/results/gigaword-10k.md",
        lambda: page.summary(load(protocol.RESULTS)),
    ),
}


@pytest.mark.parametrize("name", TABLES)
def test_published_block_is_what_its_results_file_renders(name):
    page, render = TABLES[name]
    assert block(page, name) == render()

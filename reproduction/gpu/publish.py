"""Publish ``make gpu-check`` runs (docs/gpu.md): each run's ``summary.json`` is kept in
``reproduction/gpu/published/``, and the ``gpu-check`` block of docs/gpu.md is rendered from every
kept summary, oldest first. A run of part ``bench`` also brings its ``gpu.json`` into
``reproduction/benchmarks/results/``, whose figure and table (docs/results/speed.md) are redrawn
here from the CPU and GPU results together.

    python -m reproduction.gpu.publish RUN_DIR [RUN_DIR ...]

RUN_DIR is a ``--copy-to`` folder of ``make gpu-check`` (``summary.json``, and ``gpu.json`` after
part ``bench``). The log tails of steps that passed are dropped from the kept summary (they name
the GPU machine's folders); a failed step keeps its tail.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from reproduction.gpu.report import render
from reproduction.results_page import write_between_markers

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "reproduction" / "gpu" / "published"
PAGE = ROOT / "docs" / "gpu.md"
START, END = "<!-- gpu-check:start -->", "<!-- gpu-check:end -->"


def without_passed_tails(node):
    """``node`` without the ``tail`` of every step that exited 0."""
    if isinstance(node, dict):
        passed = node.get("returncode") == 0
        return {k: without_passed_tails(v) for k, v in node.items() if not (passed and k == "tail")}
    if isinstance(node, list):
        return [without_passed_tails(v) for v in node]
    return node


def repository_path(path: str) -> str:
    """A results folder as a path inside the repository: the GPU machine records where its own
    clone lay (``/somewhere/reproduction/gpu/results/RUN``), which names no folder here."""
    parts = Path(path).parts
    return str(Path(*parts[parts.index("reproduction") :])) if "reproduction" in parts else path


def kept_name(summary: dict) -> str:
    """``YYYY-MM-DD-HHMM-<part>.json`` from the run's UTC start and its parts."""
    day, clock, _ = summary["date"].split()
    return f"{day}-{clock.replace(':', '')}-{summary['part']}.json"


def published() -> list[dict]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(PUBLISHED.glob("*.json"))]


def index(summaries: list[dict]) -> str:
    """One line a kept run: when, on which GPU, which parts, and whether every step passed."""
    rows = ["| run (UTC) | GPU | parts | outcome |", "|---|---|---|---|"]
    rows += [
        f"| {s['date'].removesuffix(' UTC')} | {s['machine']['device']} | "
        f"{s['part'].replace('-', ', ')} | {'passed' if s['passed'] else 'FAILED'} |"
        for s in summaries
    ]
    return "\n".join(rows) + "\n"


def render_block(summaries: list[dict]) -> str:
    """An index of the kept runs, then every run's summary, its headings two levels down (they sit
    under a section of the page)."""
    parts = [index(summaries)] if summaries else []
    for summary in summaries:
        lines = [
            f"##{line}" if line.startswith("#") else line for line in render(summary).splitlines()
        ]
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)


def publish_bench(run_dir: Path) -> None:
    from reproduction.benchmarks.plot import load_results, plot_maskpredict_speedup, plot_ratios
    from reproduction.benchmarks.run import RESULTS, update_pages

    shutil.copy(run_dir / "gpu.json", RESULTS / "gpu.json")
    results = load_results(RESULTS)
    plot_ratios(results, RESULTS / "speed.png")
    plot_maskpredict_speedup(results, RESULTS / "maskpredict_speedup.png")
    update_pages(results)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m reproduction.gpu.publish",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("runs", nargs="+", type=Path, help="--copy-to folders of make gpu-check")
    args = p.parse_args(argv)
    PUBLISHED.mkdir(exist_ok=True)
    for run_dir in args.runs:
        if not (run_dir / "summary.json").is_file():
            p.error(f"{run_dir} has no summary.json: give the --copy-to folder of make gpu-check")
        summary = without_passed_tails(
            json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
        )
        summary["results"] = repository_path(summary["results"])
        (PUBLISHED / kept_name(summary)).write_text(
            json.dumps(summary, indent=1) + "\n", encoding="utf-8"
        )
        if (run_dir / "gpu.json").is_file():
            publish_bench(run_dir)
    write_between_markers(PAGE, render_block(published()), START, END)
    print(
        f"kept {len(published())} runs in {PUBLISHED.relative_to(ROOT)}; wrote the gpu-check "
        "block of docs/gpu.md"
    )


if __name__ == "__main__":
    main()

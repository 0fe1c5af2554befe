"""Run the benchmarks side by side and publish their ratios.

    python -m reproduction.benchmarks.run [--only NAME ...] [--device cpu|cuda] [--quick] [--out DIR]

Each module named in ``BENCHMARKS`` has ``run(device: str, quick: bool) -> dict`` that
returns ``{"metrics": {name: value}, "details": {...}, "hardware": "..."}``, measured with
the harness of ``benchmarks/common.py``: every ratio within one process, both sides on the
same batches, interleaved, so machine load affects both alike. Results go to
``benchmarks/results/{cpu,gpu}.json`` (merged with earlier results of modules not re-run),
to the table between the ``bench:start``/``bench:end`` markers of docs/results/speed.md and
to the figure ``benchmarks/results/speed.png`` (``benchmarks/plot.py``). ``--quick`` (fewer
repetitions, noisier: a check that the benchmarks run) writes to ``--out``, a new temporary
folder unless given; only a run into ``benchmarks/results`` updates the table.
"""
from __future__ import annotations

import argparse
import importlib
import json
import logging
import tempfile
import time
from pathlib import Path

import torch

from reproduction.benchmarks.common import ROOT, hardware
from reproduction.benchmarks.plot import load_results, plot_ratios
from reproduction.results_page import write_between_markers
from fairseq_ext.errors import FairseqExtError

RESULTS = ROOT / "reproduction" / "benchmarks" / "results"
BENCHMARKS = ["hicmlm", "prophetnet", "posmask", "unilm"]
START, END = "<!-- bench:start -->", "<!-- bench:end -->"


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
    return "\n".join(rows)


def update_readme(results: dict) -> None:
    try:
        write_between_markers(ROOT / "docs" / "results" / "speed.md", render_table(results) + "\n", START, END)
    except FairseqExtError:  # a page without the block keeps its text
        return


def benchmark(name: str):
    """The module of benchmark ``name`` (its ``run(device, quick)``)."""
    return importlib.import_module(f"reproduction.benchmarks.{name}")


def main(argv: list[str] | None = None) -> None:
    from fairseq_ext.errors import require

    p = argparse.ArgumentParser(prog="python -m reproduction.benchmarks.run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", nargs="+", choices=BENCHMARKS, help="run only these benchmarks")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where the models run (default: cpu)")
    p.add_argument("--quick", action="store_true",
                   help="fewer repetitions (a smoke run, noisier), written to --out, not to the published results")
    p.add_argument("--out", type=Path, help="folder of the results (default: benchmarks/results; with --quick, "
                                            "a new temporary folder)")
    args = p.parse_args(argv)
    require(args.device != "cuda" or torch.cuda.is_available(),
            "--device cuda, but torch.cuda.is_available() is false (a CPU build of torch, or no GPU visible): "
            "run with --device cpu, or on a machine with a GPU and a CUDA build of torch")
    logging.getLogger().setLevel(logging.WARNING)
    out_dir = args.out or (Path(tempfile.mkdtemp(prefix="fairseq_ext_bench_quick_")) if args.quick else RESULTS)
    kind = "gpu" if args.device == "cuda" else "cpu"
    out_dir.mkdir(parents=True, exist_ok=True)
    out_path = out_dir / f"{kind}.json"
    previous = json.loads(out_path.read_text()) if out_path.exists() else {"benchmarks": {}}
    merged = {"hardware": hardware(args.device), "torch": torch.__version__,
              "date": time.strftime("%Y-%m-%d"), "benchmarks": dict(previous.get("benchmarks", {}))}
    for name in args.only or BENCHMARKS:
        module = benchmark(name)
        t0 = time.time()
        result = module.run(args.device, args.quick)
        result["seconds"] = round(time.time() - t0, 1)
        merged["benchmarks"][name] = result
        for metric, value in result["metrics"].items():
            print(f"{name:12s} {metric:45s} {value}")
    out_path.write_text(json.dumps(merged, indent=2) + "\n")
    results = load_results(out_dir)
    plot_ratios(results, out_dir / "speed.png")
    published = out_dir.resolve() == RESULTS.resolve()
    if published:
        update_readme(results)
    print(f"wrote {out_path}, {out_dir / 'speed.png'}" + (" and the table of docs/results/speed.md" if published else ""))


if __name__ == "__main__":
    from fairseq_ext.errors import install_cli_excepthook

    install_cli_excepthook()
    main()

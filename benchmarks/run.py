"""Run the benchmarks side by side and publish their ratios.

    python -m benchmarks.run [--only NAME ...] [--quick] [--device cpu|cuda]

Each module named in ``BENCHMARKS`` has ``run(device: str, quick: bool) -> dict`` that
returns ``{"metrics": {name: value}, "details": {...}}`` (and ``"hardware"`` when it runs
with other settings than the process, e.g. another thread count); every ratio is measured within one
process, both sides on the same batches, so machine load affects both alike. Results go
to ``benchmarks/results/{cpu,gpu}.json`` (merged with earlier results of modules not re-run),
to the table between the ``bench:start``/``bench:end`` markers of the README and to the
figure ``benchmarks/results/speed.png`` (``benchmarks/plot.py``).
"""
from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import platform
import time
from pathlib import Path

import torch

from benchmarks.plot import load_results, plot_ratios

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
BENCHMARKS = ["hicmlm", "prophetnet", "posmask", "unilm"]
START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def hardware(device: str) -> str:
    if device == "cuda":
        return torch.cuda.get_device_name(0)
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {torch.get_num_threads()} threads"


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
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    if START not in text or END not in text:
        return
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(f"{head}{START}\n{render_table(results)}\n{END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", nargs="+", choices=BENCHMARKS, help="run only these benchmarks")
    p.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run, noisier)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args(argv)
    logging.getLogger().setLevel(logging.WARNING)
    kind = "gpu" if args.device == "cuda" else "cpu"
    RESULTS.mkdir(parents=True, exist_ok=True)
    out_path = RESULTS / f"{kind}.json"
    previous = json.loads(out_path.read_text()) if out_path.exists() else {"benchmarks": {}}
    merged = {"hardware": hardware(args.device), "torch": torch.__version__,
              "date": time.strftime("%Y-%m-%d"), "benchmarks": dict(previous.get("benchmarks", {}))}
    for name in args.only or BENCHMARKS:
        module = importlib.import_module(f"benchmarks.{name}")
        t0 = time.time()
        result = module.run(args.device, args.quick)
        result["seconds"] = round(time.time() - t0, 1)
        result.setdefault("hardware", hardware(args.device))  # the threads this module ran with
        merged["benchmarks"][name] = result
        for metric, value in result["metrics"].items():
            print(f"{name:12s} {metric:45s} {value}")
    out_path.write_text(json.dumps(merged, indent=2) + "\n")
    results = load_results(RESULTS)
    update_readme(results)
    plot_ratios(results, RESULTS / "speed.png")
    print(f"wrote {out_path}, {RESULTS / 'speed.png'}"
          + (" and the README table" if os.path.exists(ROOT / "README.md") else ""))


if __name__ == "__main__":
    main()

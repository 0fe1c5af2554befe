"""The speed figure of table 4 (docs/results/speed.md): every ratio of ``benchmarks/results/{cpu,gpu}.json``
as a horizontal bar, coloured by family, with its goal as a black tick where it has one.

    python -m reproduction.benchmarks.plot          # redraw benchmarks/results/speed.png from the JSON files

``python -m reproduction.benchmarks.run`` draws it after every run.
"""
from __future__ import annotations

import json
import logging
import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
GOAL = re.compile(r"^\s*([<>]=)\s*([0-9.]+)")
RATIO_NAME = re.compile(r"ratio|speedup|_vs_")


def ratio_metrics(results: dict) -> list[tuple[str, str, str, float, str | None]]:
    """``(kind, family, metric, value, goal)`` of every ratio: a metric with a ``>= X``/``<= X``
    goal or whose name says ratio, speedup or _vs_ (absolute rates and memory are left out)."""
    rows = []
    for kind in ("cpu", "gpu"):
        for family, out in results.get(kind, {}).get("benchmarks", {}).items():
            goals = out.get("goals", {})
            for metric, value in out["metrics"].items():
                goal = goals.get(metric)
                if (goal and GOAL.match(goal)) or RATIO_NAME.search(metric):
                    rows.append((kind, family, metric, float(value), goal if goal and GOAL.match(goal) else None))
    return rows


def plot_ratios(results: dict, out: Path) -> bool:
    """Draw the ratios of ``results`` (``{"cpu": json, "gpu": json}``) into ``out``; False when there are none."""
    rows = ratio_metrics(results)
    if not rows:
        return False
    import matplotlib

    logging.getLogger("matplotlib").setLevel(logging.WARNING)  # its font search logs at DEBUG otherwise
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    families = sorted({family for _, family, _, _, _ in rows})
    colours = {family: f"C{i}" for i, family in enumerate(families)}
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(rows) + 1.6))
    y = list(range(len(rows)))[::-1]
    ax.barh(y, [r[3] for r in rows], color=[colours[r[1]] for r in rows])
    for yi, (_, _, _, value, goal) in zip(y, rows):
        ax.text(value, yi, f" {value:.2f}", va="center", fontsize=7)
        if goal:
            ax.plot([float(GOAL.match(goal).group(2))] * 2, [yi - 0.4, yi + 0.4], color="black", lw=2)
    ax.set_yticks(y, [f"{metric} ({kind})" for kind, _, metric, _, _ in rows], fontsize=7)
    ax.axvline(1.0, color="grey", lw=0.8, ls="--")
    hardware = "; ".join(sorted({f"{kind}: {out.get('hardware', results[kind]['hardware'])}"
                                 for kind in results for out in results[kind]["benchmarks"].values()}))
    ax.set(xlabel="ratio (black tick: goal)", title=f"Speed ratios, side by side in one process\n{hardware}")
    ax.title.set_fontsize(9)
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=colours[f]) for f in families], labels=families,
              fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return True


def load_results(folder: Path = RESULTS) -> dict:
    """``{"cpu": ..., "gpu": ...}`` for the result files present in ``folder``."""
    return {kind: json.loads((folder / f"{kind}.json").read_text())
            for kind in ("cpu", "gpu") if (folder / f"{kind}.json").exists()}


def main() -> None:
    out = RESULTS / "speed.png"
    if not plot_ratios(load_results(), out):
        raise SystemExit(f"error: no ratio in {RESULTS}/cpu.json or gpu.json (run python -m reproduction.benchmarks.run first)")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

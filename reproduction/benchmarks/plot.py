"""The speed figures of table 4 (docs/results/speed.md), from ``benchmarks/results/{cpu,gpu}.json``:

* ``speed.png``: every ratio as a horizontal bar, coloured by family, with its goal as a black
  tick where it has one;
* ``maskpredict_speedup.png``: the mask-predict decoding rows of issue 41 (``hicmlm``'s
  ``details["decode_rows"]``), speed-up over the teacher against batch size, one line per
  number of decoder passes, at length beam 1 and teacher beam 5 (drawn once rows are measured).

    python -m reproduction.benchmarks.plot          # redraw both from the JSON files

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
                    rows.append(
                        (
                            kind,
                            family,
                            metric,
                            float(value),
                            goal if goal and GOAL.match(goal) else None,
                        )
                    )
    return rows


def plot_ratios(results: dict, out: Path) -> bool:
    """Draw the ratios of ``results`` (``{"cpu": json, "gpu": json}``) into ``out``; False when
    there are none."""
    rows = ratio_metrics(results)
    if not rows:
        return False
    import matplotlib

    logging.getLogger("matplotlib").setLevel(
        logging.WARNING
    )  # its font search logs at DEBUG otherwise
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
            ax.plot(
                [float(GOAL.match(goal).group(2))] * 2, [yi - 0.4, yi + 0.4], color="black", lw=2
            )
    ax.set_yticks(y, [f"{metric} ({kind})" for kind, _, metric, _, _ in rows], fontsize=7)
    ax.axvline(1.0, color="grey", lw=0.8, ls="--")
    hardware = "; ".join(
        sorted(
            {
                f"{kind}: {out.get('hardware', results[kind]['hardware'])}"
                for kind in results
                for out in results[kind]["benchmarks"].values()
            }
        )
    )
    ax.set(
        xlabel="ratio (black tick: goal)",
        title=f"Speed ratios, side by side in one process\n{hardware}",
    )
    ax.title.set_fontsize(9)
    ax.legend(
        handles=[plt.Rectangle((0, 0), 1, 1, color=colours[f]) for f in families],
        labels=families,
        fontsize=7,
        loc="lower right",
    )
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return True


def decode_rows(results: dict) -> dict:
    """``{kind: hicmlm result}`` of the results files whose ``hicmlm`` result has decoding rows."""
    found = {
        kind: results[kind]["benchmarks"].get("hicmlm", {})
        for kind in ("cpu", "gpu")
        if kind in results
    }
    return {kind: out for kind, out in found.items() if out.get("details", {}).get("decode_rows")}


def plot_maskpredict_speedup(
    results: dict, out: Path, length_beam: int = 1, teacher_beam: int = 5
) -> bool:
    """Draw the speed-up against batch size, one line per number of passes, of the decoding rows
    at ``length_beam`` and ``teacher_beam`` into ``out`` (a panel per results file that has
    them); False when there are none."""
    found = decode_rows(results)
    measured = {
        kind: [
            r
            for r in out["details"]["decode_rows"]
            if r["length_beam"] == length_beam and r["teacher_beam"] == teacher_beam
        ]
        for kind, out in found.items()
    }
    measured = {kind: rows for kind, rows in measured.items() if rows}
    if not measured:
        return False
    import matplotlib

    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(measured), figsize=(5.5 * len(measured), 4), squeeze=False)
    for ax, (kind, rows) in zip(axes[0], measured.items()):
        for passes in sorted({r["passes"] for r in rows}):
            line = sorted((r["batch"], r["speedup"]) for r in rows if r["passes"] == passes)
            ax.plot(
                [b for b, _ in line],
                [v for _, v in line],
                marker="o",
                label=f"{passes} pass{'es' if passes != 1 else ''}",
            )
        batches = sorted({r["batch"] for r in rows})
        ax.set_xscale("log", base=2)
        ax.set_xticks(batches, [str(b) for b in batches])
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        hardware = found[kind].get("hardware", results[kind]["hardware"])
        ax.set(
            xlabel="batch size (sentences)",
            ylabel="teacher seconds / student seconds",
            title=f"Mask-predict (length beam {length_beam}) vs teacher beam "
            f"{teacher_beam}\n{kind}: {hardware}",
        )
        ax.title.set_fontsize(9)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return True


def load_results(folder: Path = RESULTS) -> dict:
    """``{"cpu": ..., "gpu": ...}`` for the result files present in ``folder``."""
    return {
        kind: json.loads((folder / f"{kind}.json").read_text())
        for kind in ("cpu", "gpu")
        if (folder / f"{kind}.json").exists()
    }


def main() -> None:
    results, out = load_results(), RESULTS / "speed.png"
    if not plot_ratios(results, out):
        raise SystemExit(
            f"error: no ratio in {RESULTS}/cpu.json or gpu.json (run python -m "
            "reproduction.benchmarks.run first)"
        )
    print(f"wrote {out}")
    if plot_maskpredict_speedup(results, RESULTS / "maskpredict_speedup.png"):
        print(f"wrote {RESULTS / 'maskpredict_speedup.png'}")


if __name__ == "__main__":
    main()

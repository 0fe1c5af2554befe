"""Reproduce the HI-CMLM paper's analysis from ``fairseq-generate`` output.

    fairseq-generate ... --task cmlm_hybrid --retain-iter-history --iter-decode-max-iter 9 \\
        --iter-decode-force-max-iter --post-process sentencepiece > fence.txt
    python -m fairseq_ext.analysis --run fence_replace=fence.txt --run all_mask=mask.txt \\
        --max-iter 10 --post-process sentencepiece --out-dir figures

Prints BLEU after each iteration (Figure 2), BLEU by reference length (Table 2) and the
share of copied embeddings among the masked slots per iteration (Figure 3), and writes
them as PNG plots and ``analysis.json`` under ``--out-dir``. A run named after a hybrid
strategy uses it for the copy share; ``NAME=PATH@STRATEGY`` names it explicitly.
``--max-iter`` counts decoder passes (fairseq's ``--iter-decode-max-iter`` + 1).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

from fairseq_ext.common.cli import command_parser
from fairseq_ext.fairseq_changes import quiet

if __name__ == "__main__":  # before the imports below
    quiet.hush_command(sys.argv[1:])

from fairseq_ext.analysis.generate_output import read_generate_output  # noqa: E402
from fairseq_ext.analysis.iterations import (
    LENGTH_BINS,
    bin_label,
    bleu_by_length,
    bleu_per_iteration,
    copy_share_per_iteration,
)
from fairseq_ext.masking.hybrid import FENCE_FIRST, HYBRID_STRATEGIES, PAPER_MASK_WEIGHT


def _parse_run(spec: str) -> tuple[str, str, str]:
    if "=" not in spec:
        raise argparse.ArgumentTypeError(
            f"--run {spec!r}: expected NAME=PATH or NAME=PATH@STRATEGY"
        )
    name, rest = spec.split("=", 1)
    path, _, strategy = rest.partition("@")
    strategy = strategy or (name if name in HYBRID_STRATEGIES else "all_mask")
    if strategy not in HYBRID_STRATEGIES:
        raise argparse.ArgumentTypeError(f"--run {spec!r}: unknown strategy {strategy!r}")
    return name, path, strategy


def _fmt(x: float) -> str:
    return "   -  " if math.isnan(x) else f"{x:6.2f}"


def analyse(
    runs, max_iter: int, post_process: str | None, mask_weight: float, fence_first: str
) -> dict:
    results, labels = {}, [bin_label(*b) for b in LENGTH_BINS]
    for name, path, strategy in runs:
        sentences = read_generate_output(path)
        weighing = (strategy, mask_weight, fence_first)
        results[name] = {
            "path": path,
            "strategy": strategy,
            "sentences": len(sentences),
            "bleu_per_iteration": bleu_per_iteration(sentences, max_iter, post_process),
            "bleu_by_length": dict(zip(labels, bleu_by_length(sentences))),
            "copy_share_of_masked": dict(
                zip(labels, copy_share_per_iteration(sentences, max_iter, *weighing))
            ),
        }
    return results


def print_tables(results: dict, max_iter: int, out=sys.stdout) -> None:
    names = list(results)
    width = max(12, *(len(n) for n in names)) + 1

    def table(title: str, corner: str, column: int, key: str, rows: list) -> None:
        print(title, file=out)
        print(corner.ljust(column) + "".join(n.rjust(width) for n in names), file=out)
        for label, row in rows:
            values = [_fmt(results[n][key][row]).rjust(width) for n in names]
            print(label.ljust(column) + "".join(values), file=out)

    passes = [(str(t + 1), t) for t in range(max_iter)]
    table("BLEU after each iteration (Figure 2)", "iter", 6, "bleu_per_iteration", passes)
    labels = [(bin_label(*b), bin_label(*b)) for b in LENGTH_BINS]
    title = "\nBLEU by reference length in words, final output (Table 2)"
    table(title, "bin", 10, "bleu_by_length", labels)
    for n in names:
        strategy = results[n]["strategy"]
        print(
            f"\nShare of copied embeddings among masked slots, {n} ({strategy}) (Figure 3)",
            file=out,
        )
        print("bin".ljust(10) + "".join(f"{t + 1:>7d}" for t in range(max_iter)), file=out)
        for label, shares in results[n]["copy_share_of_masked"].items():
            print(label.ljust(10) + "".join(f"{_fmt(s):>7}" for s in shares), file=out)


def plot(results: dict, max_iter: int, out_dir: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []

    def save(fig, ax, name: str, **labels) -> None:
        legend = labels.pop("legend", None)
        ax.set(**labels)
        ax.legend(title=legend)
        paths.append(os.path.join(out_dir, name))
        fig.tight_layout()
        fig.savefig(paths[-1], dpi=120)
        plt.close(fig)

    iters = list(range(1, max_iter + 1))
    fig, ax = plt.subplots(figsize=(6, 4))
    for n, r in results.items():
        ax.plot(iters, r["bleu_per_iteration"], marker="o", label=n)
    ax.grid(alpha=0.3)
    save(
        fig,
        ax,
        "bleu_per_iteration.png",
        xlabel="decoder pass (iteration)",
        ylabel="sacreBLEU",
        title="BLEU after each iteration",
    )
    labels = [bin_label(*b) for b in LENGTH_BINS]
    fig, ax = plt.subplots(figsize=(6, 4))
    width = 0.8 / max(1, len(results))
    for k, (n, r) in enumerate(results.items()):
        x = [i + k * width for i in range(len(labels))]
        ax.bar(x, [r["bleu_by_length"][lb] for lb in labels], width=width, label=n)
    ax.set_xticks([i + width * (len(results) - 1) / 2 for i in range(len(labels))], labels)
    save(
        fig,
        ax,
        "bleu_by_length.png",
        xlabel="reference length (words)",
        ylabel="sacreBLEU",
        title="BLEU by target length",
    )
    for n, r in results.items():
        fig, ax = plt.subplots(figsize=(6, 4))
        for label, shares in r["copy_share_of_masked"].items():
            ax.plot(iters, shares, marker="o", label=label)
        ax.grid(alpha=0.3)
        save(
            fig,
            ax,
            f"copy_share_{n}.png",
            xlabel="decoder pass (iteration)",
            ylabel="copied share of masked slots",
            title=f"Copied embeddings in the masked area: {n}",
            ylim=(0, 1.05),
            legend="reference length",
        )
    return paths


def main(argv: list[str] | None = None) -> None:
    p = command_parser("python -m fairseq_ext.analysis", __doc__)
    p.add_argument(
        "--run",
        action="append",
        type=_parse_run,
        required=True,
        help="NAME=PATH[@STRATEGY]: a fairseq-generate output with --retain-iter-history",
    )
    p.add_argument("--max-iter", type=int, default=10, help="decoder passes to report (default 10)")
    p.add_argument(
        "--post-process",
        default="sentencepiece",
        help="how the history lines are detokenised: sentencepiece, subword_nmt or none",
    )
    p.add_argument(
        "--mask-weight",
        type=float,
        default=PAPER_MASK_WEIGHT,
        help=f"the --mask-weight the weighted_sum runs decoded with (default {PAPER_MASK_WEIGHT})",
    )
    p.add_argument(
        "--fence-first",
        choices=FENCE_FIRST,
        default=FENCE_FIRST[0],
        help=f"the --fence-first the fence_replace runs decoded with (default {FENCE_FIRST[0]})",
    )
    p.add_argument("--out-dir", default=None, help="write PNG plots and analysis.json here")
    p.add_argument("--verbose", action="store_true", help=quiet.VERBOSE_HELP)
    args = p.parse_args(argv)
    if args.max_iter < 1:
        p.error("--max-iter must be >= 1")
    post = None if args.post_process == "none" else args.post_process
    try:
        results = analyse(args.run, args.max_iter, post, args.mask_weight, args.fence_first)
    except (OSError, ValueError) as exc:
        p.exit(2, f"error: {exc}\n")
    print_tables(results, args.max_iter)
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
        with open(os.path.join(args.out_dir, "analysis.json"), "w") as f:
            json.dump(results, f, indent=2)
        for path in plot(results, args.max_iter, args.out_dir):
            print(f"wrote {path}")


if __name__ == "__main__":
    main()

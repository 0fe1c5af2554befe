#!/usr/bin/env python
"""What the fine-tuning batches of table 2 hold, for each way of cutting them: batches per
epoch, pairs per batch, and the pairs and target tokens a run sees in its first updates. It
explains the last step of the bisection (docs/results/prophetnet.md): fairseq's batch iterator
rounds each batch down to a multiple of ``--required-batch-size-multiple`` pairs (8 by
default), a plain training loop does not, so at the same ``--max-tokens`` and number of
updates the loop trains on more pairs.

    python reproduction/prophetnet/batch_stats.py DATA_BIN [--max-tokens 2048] [--seed 1] \\
        [--updates 500] [--out reproduction/prophetnet/batch_stats.json] [--page
        docs/results/prophetnet.md]

The batches are those ``reference_transformers.py`` trains on (``--batching``): ``fairseq``
(length-sorted, as ``fairseq-train``), ``fairseq-unsorted`` (as ``fairseq-train
--unsorted-batches``) and ``unsorted`` (the reference loop's).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from collect_gigaword import write_into_page  # this folder

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "prophetnet"))
from gigaword_point import hardware, relative  # noqa: E402  (the results-file helpers of examples/prophetnet/gigaword.sh)
from reference_transformers import batches, fairseq_args

START, END = "<!-- batches:start -->", "<!-- batches:end -->"
KINDS = {
    "fairseq": "fairseq-train (length-sorted)",
    "fairseq-unsorted": "fairseq-train --unsorted-batches",
    "unsorted": "reference loop, unsorted",
}


def statistics_of(
    data: str,
    kind: str,
    max_tokens: int,
    seed: int,
    updates: int,
    source_lang: str = "article",
    target_lang: str = "title",
) -> dict:
    """The batches of the first ``updates`` updates (epochs follow one another as in training)."""
    from fairseq import tasks

    a = argparse.Namespace(
        source_lang=source_lang,
        target_lang=target_lang,
        arch="prophetnet_tiny",
        ngram=2,
        label_smoothing=0.1,
        lr=7e-4,
        warmup=200,
        clip_norm=1.0,
        max_tokens=max_tokens,
        seed=seed,
        batching=kind,
    )
    args = fairseq_args(data, a)
    task = tasks.setup_task(args)
    task.load_dataset("train")
    pairs, targets, epoch, first_epoch = [], [], 1, 0
    while len(pairs) < updates:
        for sample in batches(
            task, "train", args, seed=seed, shuffle=True, epoch=epoch, batching=kind
        ):
            pairs.append(sample["nsentences"])
            targets.append(sample["ntokens"])
        first_epoch = first_epoch or len(pairs)
        epoch += 1
    pairs, targets = np.array(pairs[:updates]), np.array(targets[:updates])
    return {
        "batches_per_epoch": first_epoch,
        "pairs_per_batch_mean": round(float(pairs.mean()), 2),
        "pairs_seen": int(pairs.sum()),
        "target_tokens_seen": int(targets.sum()),
        "share_of_batches_a_multiple_of_8": round(float(np.mean(pairs % 8 == 0)), 3),
    }


def markdown(result: dict) -> str:
    updates = result["updates"]
    lines = [
        f"| batches (--max-tokens {result['max_tokens']}, seed {result['seed']}) | batches per "
        f"epoch | pairs per batch (mean) | pairs in {updates} updates | target tokens in "
        f"{updates} updates | batches of a multiple of 8 pairs |",
        "|---|---|---|---|---|---|",
    ]
    for kind, row in result["kinds"].items():
        lines.append(
            f"| {KINDS[kind]} | {row['batches_per_epoch']} | {row['pairs_per_batch_mean']:.1f} | "
            f"{row['pairs_seen']:,} | {row['target_tokens_seen']:,} | "
            f"{100 * row['share_of_batches_a_multiple_of_8']:.0f}% |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("data", help="binarized pairs (gigaword.sh's PREP/bin)")
    p.add_argument("-s", "--source-lang", default="article")
    p.add_argument("-t", "--target-lang", default="title")
    p.add_argument("--max-tokens", type=int, default=2048)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--updates", type=int, default=500)
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "batch_stats.json")
    p.add_argument("--page", type=Path, help="Markdown page whose batches block is rewritten")
    a = p.parse_args(argv)
    if not Path(a.data, f"dict.{a.source_lang}.txt").exists():
        p.error(
            f"{a.data} has no dict.{a.source_lang}.txt: prepare the data with "
            "data_prep/gigaword.sh first"
        )
    result = {
        "data": relative(str(Path(a.data).resolve())),
        "max_tokens": a.max_tokens,
        "seed": a.seed,
        "updates": a.updates,
        "command": relative(
            " ".join(["python", "reproduction/prophetnet/batch_stats.py", *(argv or sys.argv[1:])])
        ),
        "hardware": hardware(),
        "kinds": {
            kind: statistics_of(
                a.data, kind, a.max_tokens, a.seed, a.updates, a.source_lang, a.target_lang
            )
            for kind in KINDS
        },
    }
    a.out.write_text(json.dumps(result, indent=2) + "\n")
    table = markdown(result)
    print(table, end="")
    if a.page:
        write_into_page(a.page, table, START, END)


if __name__ == "__main__":
    main()

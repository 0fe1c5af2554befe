#!/usr/bin/env python
"""A sentence-pair classification task for fine-tuning a pre-trained encoder with fairseq's
``sentence_prediction``, built from a Gigaword sample (train10k / valid1k): is this headline
the one written for this article?

    python data_prep/headline_match.py --gigaword DIR --spm SPM.model --dict DICT.txt --out OUT

Every article of a split appears twice: with its own title (label ``match``) and with the
title of another article of the same split, drawn with a fixed seed (label ``other``), so
the classes are balanced. Splits: ``train10k`` -> train, ``valid1k`` -> valid (Gigaword's
test set is not used). The text is encoded with the pre-training sentencepiece model and
binarized with its dictionary (``--dict``, the pre-training ``dict.txt``), as
``sentence_prediction`` expects: OUT/bin/input0 (titles), OUT/bin/input1 (articles),
OUT/bin/label. The title comes first so that ``--shorten-method truncate`` cuts the end of
a long article, never the title. A ``--spm`` model that is not the one ``--dict`` was built with
stops the script before it writes anything (``fairseq_ext.common.tokenizer_check``).
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

from sentence_prediction_data import binarize

from fairseq_ext.common.tokenizer_check import checked_sentencepiece

SPLITS = {"train": "train10k", "valid": "valid1k"}


def read(path: Path) -> list[str]:
    if not path.exists():
        raise SystemExit(
            f"error: {path} does not exist (pass --gigaword DIR with train10k/valid1k files)"
        )
    return [
        " ".join(line.replace("<unk>", "UNK").split())
        for line in path.read_text(encoding="utf-8").splitlines()
    ]


def pairs(articles: list[str], titles: list[str], seed: int) -> list[tuple[str, str, str]]:
    """(article, title, label): each article with its title and with another article's title."""
    if len(articles) != len(titles):
        raise SystemExit(f"error: {len(articles)} articles but {len(titles)} titles")
    keep = [i for i in range(len(articles)) if articles[i] and titles[i]]
    if len(keep) < 2:
        raise SystemExit("error: need at least two non-empty article/title pairs")
    rng = random.Random(seed)
    out = []
    for i in keep:
        j = i
        while j == i or titles[j] == titles[i]:
            j = keep[rng.randrange(len(keep))]
        out.append((articles[i], titles[i], "match"))
        out.append((articles[i], titles[j], "other"))
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--gigaword", required=True, type=Path, help="folder with train10k.* and valid1k.* files"
    )
    p.add_argument("--spm", required=True, help="the pre-training sentencepiece model")
    p.add_argument("--dict", required=True, help="the pre-training fairseq dict.txt")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    sp = checked_sentencepiece(args.spm, "--spm", args.dict, "headline_match.py")
    raw = args.out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for split, name in SPLITS.items():
        rows = pairs(
            read(args.gigaword / f"{name}.article.txt"),
            read(args.gigaword / f"{name}.title.txt"),
            args.seed,
        )
        for column, field in ((1, "input0"), (0, "input1")):
            with open(raw / f"{split}.{field}", "w", encoding="utf-8") as f:
                for row in rows:
                    f.write(" ".join(sp.encode(row[column], out_type=str)) + "\n")
        (raw / f"{split}.label").write_text(
            "".join(row[2] + "\n" for row in rows), encoding="utf-8"
        )
        print(f"{split}: {len(rows)} pairs ({len(rows) // 2} articles)", file=sys.stderr)
    binarize(raw, args.out, ("input0", "input1"), args.dict)


if __name__ == "__main__":
    main()

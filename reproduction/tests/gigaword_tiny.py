"""A tiny made-up Gigaword folder (harvardnlp layout) and English folder for the driver's tests."""

from __future__ import annotations

import random
from pathlib import Path

WORDS = (
    "police army minister bank storm court talks rebels oil prices city plane team coach vote "
    "party leader fire rain fans market shares china france court trial police said on monday "
    "tuesday killed injured held won lost rose fell"
).split()


def pairs(rng: random.Random, n: int, unk: str) -> tuple[list[str], list[str]]:
    articles, titles = [], []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(8, 14))]
        if rng.random() < 0.2:
            words[rng.randrange(len(words))] = unk
        articles.append(" ".join(words + ["## ."]))
        titles.append(" ".join(words[: rng.randint(3, 5)]))
    return articles, titles


def make_gigaword(folder: Path, train: int = 40, valid: int = 8, test: int = 6) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    for prefix, n, unk in (
        ("train10k", train, "<unk>"),
        ("valid1k", valid, "<unk>"),
        ("valid4k", valid, "<unk>"),
        ("test1951", test, "UNK"),
    ):
        articles, titles = pairs(rng, n, unk)
        (folder / f"{prefix}.article.txt").write_text("\n".join(articles) + "\n")
        (folder / f"{prefix}.title.txt").write_text("\n".join(titles) + "\n")
    return folder


def make_english(folder: Path) -> Path:
    rng = random.Random(1)
    (folder / "wikitext-2-raw").mkdir(parents=True, exist_ok=True)
    (folder / "wmt16_en_ro").mkdir(parents=True, exist_ok=True)
    wiki = [" = Heading = ", ""] + [
        " ".join(rng.choice(WORDS) for _ in range(150)) + " @-@ 1990" for _ in range(3)
    ]
    (folder / "wikitext-2-raw" / "wiki.valid.raw").write_text("\n".join(wiki) + "\n")
    (folder / "wmt16_en_ro" / "newsdev2016.en").write_text(
        "\n".join(
            " ".join(rng.choice(WORDS).title() for _ in range(10)) + " &apos;s 2016"
            for _ in range(10)
        )
        + "\n"
    )
    return folder

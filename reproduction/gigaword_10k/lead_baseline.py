"""Gigaword in the published low-resource setting (the first 10,000 harvardnlp training pairs,
scored on the standard 1951-pair test set): the lead-N baseline and the published rows, the
first rows of that table (docs/results/gigaword-10k.md).

    python -m reproduction.gigaword_10k.lead_baseline --data DIR [--max-n 20]

DIR holds the harvardnlp files ``valid1k``, ``valid4k`` and ``test1951``
(``PREFIX.article.txt`` / ``PREFIX.title.txt``). Lead-N (each article's first N words, Rush et
al. 2015, section 7) is scored for N = 1 .. ``--max-n`` on both validation sets; N is chosen by
ROUGE-1 on valid4k (the larger), and the test set is scored once, for lead-8 and the chosen
N. Scorer: ``fairseq_ext.analysis.rouge`` (rouge-score, stemmed, mean sentence F1; ``UNK`` of
the test set and ``<unk>`` of train/valid are the same word to it). Writes
``reproduction/gigaword_10k/results.json``, the block of the page and its summary lines.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

from fairseq_ext.analysis.hardware import cpu_and_cores
from fairseq_ext.analysis.rouge import lead, rouge_f1
from reproduction.gigaword_10k.page import markdown, summary
from reproduction.gigaword_10k.protocol import (
    CHOOSE_ON,
    END,
    PAGE,
    RESULTS,
    ROOT,
    START,
    SUMMARY_MARKERS,
    TEST,
    VALID,
)
from reproduction.results_page import write_between_markers

UNILM_README = "microsoft/unilm, unilm-v1/README.md, Gigaword (10K)"
# ROUGE-1/2/L F1 on test1951, as published (ROUGE-1.5.5, the Perl scorer)
PUBLISHED = [
    {
        "row": "Transformer, no pre-training",
        "rouge1": 10.97,
        "rouge2": 2.23,
        "rougeL": 10.42,
        "source": f"{UNILM_README} (from Song et al. 2019, MASS)",
    },
    {
        "row": "UniLM-large (340M parameters, pre-trained)",
        "rouge1": 34.21,
        "rouge2": 15.28,
        "rougeL": 31.54,
        "source": (
            f"{UNILM_README}: 30 epochs, batch 128, lr 1e-5, label smoothing 0.1, beam 5, no "
            "repeated n-grams"
        ),
    },
]


def read_pairs(data: Path, prefix: str) -> tuple[list[str], list[str]]:
    articles = (data / f"{prefix}.article.txt").read_text(encoding="utf-8").splitlines()
    titles = (data / f"{prefix}.title.txt").read_text(encoding="utf-8").splitlines()
    if len(articles) != len(titles):
        raise SystemExit(f"{prefix}: {len(articles)} articles for {len(titles)} titles")
    return articles, titles


def lead_scores(articles: list[str], titles: list[str], n: int) -> dict:
    return {k: round(v, 2) for k, v in rouge_f1([lead(a, n) for a in articles], titles).items()}


OOV_MARKERS = ("UNK", "<unk>")  # the test release writes UNK, train and valid <unk>


def split_statistics(articles: list[str], titles: list[str]) -> dict:
    """How a split's titles relate to its articles (whitespace words, the two OOV markers one word):
    the share of title words that are an OOV marker, of titles holding one, and of title words
    that occur in their article (mean over pairs), in percent."""

    def words(line: str) -> list[str]:
        return ["<unk>" if w in OOV_MARKERS else w.lower() for w in line.split()]

    pairs = [(words(a), words(t)) for a, t in zip(articles, titles)]
    title_words = sum(len(t) for _, t in pairs)
    oov = [sum(w == "<unk>" for w in t) for _, t in pairs]
    found = [sum(w in set(a) for w in t) / len(t) for a, t in pairs if t]
    return {
        "title_words_oov": round(100 * sum(oov) / title_words, 2),
        "titles_with_oov": round(100 * sum(n > 0 for n in oov) / len(pairs), 1),
        "title_words_in_article": round(100 * sum(found) / len(found), 1),
    }


def measure(data: Path, max_n: int) -> dict:
    valid = {}
    for split in VALID:
        articles, titles = read_pairs(data, split)
        valid[split] = {str(n): lead_scores(articles, titles, n) for n in range(1, max_n + 1)}
    chosen = max(range(1, max_n + 1), key=lambda n: valid[CHOOSE_ON][str(n)]["rouge1"])
    articles, titles = read_pairs(data, TEST)
    test = {f"lead-{n}": lead_scores(articles, titles, n) for n in dict.fromkeys([8, chosen])}
    return {
        "valid": valid,
        "chosen_n": chosen,
        "chosen_on": f"{CHOOSE_ON} ROUGE-1",
        "test": test,
        "sentences": {s: len(read_pairs(data, s)[0]) for s in (*VALID, TEST)},
        "splits": {s: split_statistics(*read_pairs(data, s)) for s in (*VALID, TEST)},
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m reproduction.gigaword_10k.lead_baseline",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--data",
        type=Path,
        required=True,
        help="folder of the harvardnlp files (valid1k, valid4k, test1951)",
    )
    p.add_argument(
        "--max-n", type=int, default=20, help="lead-N for N = 1 .. this on the validation sets"
    )
    args = p.parse_args(argv)
    for prefix in (*VALID, TEST):
        for side in ("article", "title"):
            if not (args.data / f"{prefix}.{side}.txt").is_file():
                p.error(
                    f"{args.data} has no {prefix}.{side}.txt: give the folder of the harvardnlp "
                    "Gigaword files"
                )
    t0 = time.time()
    lead_part = measure(args.data, args.max_n)
    results = {
        "command": (
            "python -m reproduction.gigaword_10k.lead_baseline --data GIGAWORD --max-n "
            f"{args.max_n}"
        ),
        "wall_seconds": round(time.time() - t0, 1),
        "hardware": f"{cpu_and_cores()}, Python {platform.python_version()}",
        "scorer": "fairseq_ext.analysis.rouge (rouge-score 0.1.2, stemmed, mean sentence F1 x 100)",
        "published": PUBLISHED,
        "lead": lead_part,
        "models": {},
    }
    RESULTS.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    write_between_markers(PAGE, markdown(results), START, END)
    write_between_markers(PAGE, summary(results), *SUMMARY_MARKERS)
    print(
        f"lead-8 on test: {lead_part['test']['lead-8']}; N chosen on valid4k: "
        f"{lead_part['chosen_n']}; wrote {RESULTS.relative_to(ROOT)} and the block of "
        f"{PAGE.relative_to(ROOT)}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()

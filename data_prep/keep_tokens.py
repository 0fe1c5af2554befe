#!/usr/bin/env python
"""Write a ``--keep-tokens`` list: the tokens of a fairseq dictionary that a task's data use.

    python data_prep/keep_tokens.py --dict PRETRAINED/dict.txt --out keep.txt [--min-count N] \\
        train.src train.tgt [...]

The files are the tokenized (e.g. sentencepiece-encoded) text that fairseq-preprocess reads.
The list keeps the dictionary's order and counts (it is itself a valid ``dict.txt``); Su 2019
("Brief Explanation") keeps the tokens a task can ever need, so that the softmax over the rest is
not paid for. Tokens of the text that are outside the dictionary are reported.
"""

from __future__ import annotations

import argparse
from collections import Counter

from fairseq_ext.fairseq_changes import quiet


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("files", nargs="+", help="tokenized text, one sentence a line")
    p.add_argument("--dict", required=True, help="the full dictionary (fairseq dict.txt)")
    p.add_argument("--min-count", type=int, default=1, help="keep tokens seen at least this often")
    p.add_argument("--out", required=True, help="the list to write (fairseq dict format)")
    p.add_argument("--verbose", action="store_true", help=quiet.VERBOSE_HELP)
    args = p.parse_args(argv)
    if args.min_count < 1:
        p.error("--min-count must be >= 1")
    quiet.hush(args.verbose)  # before fairseq is imported
    from fairseq.data import Dictionary

    full = Dictionary.load(args.dict)
    counts: Counter = Counter()
    for path in args.files:
        with open(path, encoding="utf-8") as f:
            for line in f:
                counts.update(line.split())
    kept = [
        (tok, counts[tok]) for tok in full.symbols[full.nspecial :] if counts[tok] >= args.min_count
    ]
    outside = sum(n for tok, n in counts.items() if tok not in full.indices)
    with open(args.out, "w", encoding="utf-8") as f:
        f.writelines(f"{tok} {n}\n" for tok, n in kept)
    total = len(full) - full.nspecial
    print(
        f"kept {len(kept)} of {total} tokens ({100.0 * len(kept) / max(1, total):.1f}%) in "
        f"{args.out}" + (f"; {outside} running tokens are not in {args.dict}" if outside else "")
    )


if __name__ == "__main__":
    main()

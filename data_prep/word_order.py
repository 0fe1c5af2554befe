#!/usr/bin/env python
"""A word-order classification task for fine-tuning a pre-trained encoder with fairseq's
``sentence_prediction``, built from the pre-training text itself: is this sentence in its
written order, or has a span of its words been shuffled?

    python data_prep/word_order.py --raw DIR --spm SPM.model --dict DICT.txt --out OUT [--span 4]
    python data_prep/word_order.py --raw DIR --wordpiece CHECKPOINT_FOLDER --dict CONVERTED/dict.txt
        --out OUT

DIR holds ``train.txt`` and ``valid.txt`` as written by ``data_prep/wikitext2.sh`` (split by
article, so no validation sentence was seen in pre-training). Headings (`` = Title = ``) are
skipped; paragraphs are cut into sentences after `` . ``; sentences of ``--min-words`` to
``--max-words`` words are kept. Every kept sentence appears twice: as written (label
``original``) and with ``--span`` consecutive words, at a position drawn with a fixed seed,
put in another order (label ``shuffled``). Both classes hold the same words, so the task can
only be solved from word order, the knowledge position masking (Wagner et al., section 2.1)
pre-trains. Output, as ``sentence_prediction`` expects: OUT/bin/input0 (encoded with the
pre-training sentencepiece model, or with a converted checkpoint's own WordPiece tokenizer,
``--wordpiece``, and binarized with its ``dict.txt``) and OUT/bin/label. A ``--spm`` model that
is not the one ``--dict`` was built with stops the script before it writes anything
(``fairseq_ext.common.tokenizer_check``).
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from pathlib import Path

from sentence_prediction_data import binarize

SENTENCE_END = re.compile(r"(?<= [.!?]) (?=\S)")


def sentences(lines: list[str], min_words: int, max_words: int) -> list[list[str]]:
    """The sentences of the non-heading lines, as word lists of min_words..max_words words."""
    out = []
    for line in lines:
        if line.strip().startswith("= ") or not line.strip():
            continue
        for sentence in SENTENCE_END.split(line.strip()):
            words = sentence.split()
            if min_words <= len(words) <= max_words:
                out.append(words)
    return out


def shuffle_span(words: list[str], span: int, rng: random.Random) -> list[str] | None:
    """``words`` with ``span`` consecutive words reordered, or None when every span of the
    sentence holds a single repeated word (no reordering can change it)."""
    starts = [s for s in range(len(words) - span + 1) if len(set(words[s : s + span])) > 1]
    if not starts:
        return None
    s = rng.choice(starts)
    piece = words[s : s + span]
    reordered = piece[:]
    while reordered == piece:
        rng.shuffle(reordered)
    return words[:s] + reordered + words[s + span :]


def examples(sents: list[list[str]], span: int, seed: int) -> list[tuple[str, str]]:
    """(text, label) pairs: each sentence as written and with one span shuffled."""
    rng = random.Random(seed)
    out = []
    for words in sents:
        shuffled = shuffle_span(words, span, rng)
        if shuffled is None:
            continue
        out.append((" ".join(words), "original"))
        out.append((" ".join(shuffled), "shuffled"))
    rng.shuffle(out)
    return out


def _encoder(args):
    """``text -> pieces`` of the chosen tokenizer."""
    if args.spm:
        from fairseq_ext.common.tokenizer_check import checked_sentencepiece

        sp = checked_sentencepiece(args.spm, "--spm", args.dict, "word_order.py")
        return lambda text: sp.encode(text, out_type=str)
    from wordpiece import WordpieceError, encode_lines, load_tokenizer

    try:
        tokenizer = load_tokenizer(args.wordpiece)
    except WordpieceError as exc:
        raise SystemExit(f"error: {exc}") from None
    return lambda text: encode_lines(tokenizer, [text])[0][0].split()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--raw", required=True, type=Path, help="folder with train.txt and valid.txt")
    tokenizer = p.add_mutually_exclusive_group(required=True)
    tokenizer.add_argument("--spm", help="the pre-training sentencepiece model")
    tokenizer.add_argument(
        "--wordpiece",
        type=Path,
        help="a transformers checkpoint folder whose WordPiece "
        "tokenizer encodes the text (data_prep/wordpiece.py)",
    )
    p.add_argument("--dict", required=True, help="the pre-training fairseq dict.txt")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--span", type=int, default=4, help="consecutive words reordered (default 4)")
    p.add_argument("--min-words", type=int, default=8)
    p.add_argument("--max-words", type=int, default=40)
    p.add_argument(
        "--max-pieces",
        type=int,
        default=126,
        help="drop sentences longer than this in pieces, so that truncation never "
        "cuts the shuffled span off (default 126: 128 positions less <s> and </s>)",
    )
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    if args.span < 2:
        p.error(
            f"--span must be >= 2 (reordering {args.span} word changes nothing), got {args.span}"
        )
    if not 1 <= args.min_words <= args.max_words or args.min_words < args.span:
        p.error(
            f"need --span <= --min-words <= --max-words, got {args.span}, {args.min_words}, "
            f"{args.max_words}"
        )
    encode = _encoder(args)
    raw = args.out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for split in ("train", "valid"):
        source = args.raw / f"{split}.txt"
        if not source.exists():
            raise SystemExit(
                f"error: {source} does not exist (pass --raw, the raw/ folder of "
                "data_prep/wikitext2.sh)"
            )
        sents = sentences(
            source.read_text(encoding="utf-8").splitlines(), args.min_words, args.max_words
        )
        # neither tokenizer joins pieces across spaces, so a shuffled copy has as many pieces
        # as its original: dropping long originals keeps both classes balanced
        short = [w for w in sents if len(encode(" ".join(w))) <= args.max_pieces]
        kept = [
            (" ".join(encode(text)), label) for text, label in examples(short, args.span, args.seed)
        ]
        if not kept:
            raise SystemExit(
                f"error: no sentence of {source} has {args.min_words}-{args.max_words} words"
            )
        (raw / f"{split}.input0").write_text("".join(t + "\n" for t, _ in kept), encoding="utf-8")
        (raw / f"{split}.label").write_text(
            "".join(lab + "\n" for _, lab in kept), encoding="utf-8"
        )
        print(
            f"{split}: {len(kept)} examples ({sum(lab == 'original' for _, lab in kept)} original; "
            f"{len(sents) - len(short)} sentences over {args.max_pieces} pieces dropped)",
            file=sys.stderr,
        )
    binarize(raw, args.out, ("input0",), args.dict)


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Sentencepiece helpers for the data_prep scripts (real sentencepiece, python API).

    python data_prep/spm.py train  --model PREFIX --vocab-size N FILE [FILE ...]
    python data_prep/spm.py encode --model PREFIX.model < raw > pieces
    python data_prep/spm.py decode --model PREFIX.model < pieces > raw
    python data_prep/spm.py clean-pair SRC TGT OUT_SRC OUT_TGT [--max-words N]

``clean-pair`` drops pairs with an empty or whitespace-only side (training data only;
evaluation sets must keep every line) and reports how many it dropped.

Every command reads its whole input first: text that is not UTF-8 stops it with one line
naming the file, the line and the byte, before anything is written.
"""
from __future__ import annotations

import argparse
import io
import sys

import sentencepiece as spm


def train(args: argparse.Namespace) -> None:
    spm.SentencePieceTrainer.train(
        input=",".join(args.files),
        model_prefix=args.model,
        vocab_size=args.vocab_size,
        character_coverage=args.character_coverage,
        model_type="unigram",
        input_sentence_size=args.input_sentence_size,
        shuffle_input_sentence=True,
        num_threads=2,
        bos_id=-1,
        eos_id=-1,
        unk_id=0,
        pad_id=-1,
        user_defined_symbols=args.user_defined_symbols.split(",") if args.user_defined_symbols else [],
        minloglevel=2,
    )


def utf8_lines(data: bytes, name: str) -> list[str]:
    """The lines of ``data`` as text mode reads them (universal newlines); text that is not
    UTF-8 exits with one line naming ``name``, the line and the byte."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        sys.exit(f"spm.py: error: {name} line {line} is not valid UTF-8 (byte 0x{data[exc.start]:02x} at column "
                 f"{column}); convert the text to UTF-8 first, e.g. iconv -f latin1 -t utf-8. Nothing was written")
    return list(io.StringIO(text, newline=None))


def _read(path: str) -> list[str]:
    with open(path, "rb") as f:
        return utf8_lines(f.read(), path)


def encode(args: argparse.Namespace) -> None:
    sp = spm.SentencePieceProcessor(model_file=args.model)
    for line in utf8_lines(sys.stdin.buffer.read(), "standard input"):
        pieces = sp.encode(line.strip(), out_type=str)
        sys.stdout.write(" ".join(pieces) + "\n")


def decode(args: argparse.Namespace) -> None:
    sp = spm.SentencePieceProcessor(model_file=args.model)
    for line in utf8_lines(sys.stdin.buffer.read(), "standard input"):
        sys.stdout.write(sp.decode(line.split()) + "\n")


def clean_pair(args: argparse.Namespace) -> None:
    kept = dropped = 0
    src, tgt = _read(args.src), _read(args.tgt)
    if len(src) != len(tgt):
        sys.exit(f"spm.py: error: {args.src} has {len(src)} lines but {args.tgt} has {len(tgt)}: the sides of a "
                 "parallel corpus must align line by line. Nothing was written")
    with open(args.out_src, "w", encoding="utf-8") as os_, open(args.out_tgt, "w", encoding="utf-8") as ot:
        for s, t in zip(src, tgt):
            s, t = s.strip(), t.strip()
            too_long = args.max_words and (len(s.split()) > args.max_words or len(t.split()) > args.max_words)
            if not s or not t or too_long:
                dropped += 1
                continue
            os_.write(s + "\n")
            ot.write(t + "\n")
            kept += 1
    print(f"clean-pair: kept {kept} pairs, dropped {dropped} (empty side or over {args.max_words} words)",
          file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--model", required=True, help="output prefix (writes PREFIX.model and PREFIX.vocab)")
    t.add_argument("--vocab-size", type=int, default=8000)
    t.add_argument("--character-coverage", type=float, default=1.0)
    t.add_argument("--input-sentence-size", type=int, default=2_000_000)
    t.add_argument("--user-defined-symbols", default="", help="comma-separated pieces kept whole (e.g. UNK)")
    t.add_argument("files", nargs="+")
    t.set_defaults(fn=train)
    for name, fn in (("encode", encode), ("decode", decode)):
        e = sub.add_parser(name)
        e.add_argument("--model", required=True)
        e.set_defaults(fn=fn)
    c = sub.add_parser("clean-pair")
    c.add_argument("src")
    c.add_argument("tgt")
    c.add_argument("out_src")
    c.add_argument("out_tgt")
    c.add_argument("--max-words", type=int, default=0, help="also drop pairs longer than this (0: no limit)")
    c.set_defaults(fn=clean_pair)
    args = p.parse_args(argv)
    args.fn(args)


if __name__ == "__main__":
    main()

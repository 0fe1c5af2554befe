#!/usr/bin/env python
"""Sentencepiece helpers for the data_prep scripts (real sentencepiece, python API).

    python data_prep/spm.py train  --model PREFIX --vocab-size N FILE [FILE ...]
    python data_prep/spm.py encode --model PREFIX.model < raw > pieces
    python data_prep/spm.py decode --model PREFIX.model < pieces > raw
    python data_prep/spm.py clean-pair SRC TGT OUT_SRC OUT_TGT [--max-words N]
    python data_prep/spm.py check-utf8 FILE [FILE ...]

``clean-pair`` drops pairs with an empty or whitespace-only side (training data only;
evaluation sets must keep every line) and reports how many it dropped. ``check-utf8`` reads
each FILE (gzipped too) line by line; the data_prep scripts run it on their input text before
anything else.

Every command reads its whole input first: text that is not UTF-8 stops it with one line
naming the file, the line and the byte, before anything is written. What ``train`` and
``clean-pair`` write goes to temporary names (``NAME.partial-PID.EXT``), renamed when complete:
a full disk or a kill leaves no cut file under a final name.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import gzip
import io
import os
import re
import sys

import sentencepiece as spm


def train(args: argparse.Namespace) -> None:
    check_files(args)
    with complete_files(f"{args.model}.vocab", f"{args.model}.model") as (_, model):
        try:
            spm.SentencePieceTrainer.train(
                input=",".join(args.files),
                model_prefix=model[: -len(".model")],
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
                user_defined_symbols=args.user_defined_symbols.split(",")
                if args.user_defined_symbols
                else [],
                minloglevel=2,
            )
        except RuntimeError as exc:  # sentencepiece: "Vocabulary size too high (N). ... <= M"
            most = re.search(r"Vocabulary size too high .*<= (\d+)", str(exc))
            if most is None:
                raise
            sys.exit(
                f"spm.py: error: --vocab {args.vocab_size} is more pieces than this training "
                f"text holds; give --vocab {most.group(1)} or less (a few thousand sentence "
                "pairs: about 1000)"
            )


def _partial(path: str) -> str:
    """``NAME.EXT`` -> ``NAME.partial-PID.EXT``: where ``complete_files`` writes ``path``."""
    stem, ext = os.path.splitext(path)
    return f"{stem}.partial-{os.getpid()}{ext}"


@contextlib.contextmanager
def complete_files(*paths: str):
    """Temporary names for ``paths``, renamed to them in order when the block ends without an
    error (the last one last: the file a script tests for) and removed when it fails."""
    partials = [_partial(p) for p in paths]
    try:
        yield partials
        for partial, path in zip(partials, paths):
            os.replace(partial, path)
    finally:
        for partial in partials:
            if os.path.lexists(partial):
                os.remove(partial)


def _refuse_not_utf8(name: str, line: int, column: int, byte: int) -> None:
    sys.exit(
        f"spm.py: error: {name} line {line} is not valid UTF-8 (byte 0x{byte:02x} at column "
        f"{column}); "
        "convert the text to UTF-8 first, e.g. iconv -f latin1 -t utf-8. Nothing was written"
    )


def utf8_lines(data: bytes, name: str) -> list[str]:
    """The lines of ``data`` as text mode reads them (universal newlines); text that is not
    UTF-8 exits with one line naming ``name``, the line and the byte."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        _refuse_not_utf8(
            name, line, exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1, data[exc.start]
        )
    return list(io.StringIO(text, newline=None))


def check_utf8(path: str) -> None:
    """Every line of the file ``path`` (gzipped if it ends in ``.gz``) is UTF-8, read line by line;
    the first that is not exits as ``utf8_lines`` does."""
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                _refuse_not_utf8(path, number, exc.start + 1, raw[exc.start])


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
        sys.exit(
            f"spm.py: error: {args.src} has {len(src)} lines but {args.tgt} has {len(tgt)}: the "
            "sides of a "
            "parallel corpus must align line by line. Nothing was written"
        )
    with (
        complete_files(args.out_src, args.out_tgt) as (out_src, out_tgt),
        open(out_src, "w", encoding="utf-8") as os_,
        open(out_tgt, "w", encoding="utf-8") as ot,
    ):
        for s, t in zip(src, tgt):
            s, t = s.strip(), t.strip()
            too_long = args.max_words and (
                len(s.split()) > args.max_words or len(t.split()) > args.max_words
            )
            if not s or not t or too_long:
                dropped += 1
                continue
            os_.write(s + "\n")
            ot.write(t + "\n")
            kept += 1
    print(
        f"clean-pair: kept {kept} pairs, dropped {dropped} (empty side or over {args.max_words} "
        "words)",
        file=sys.stderr,
    )


def check_files(args: argparse.Namespace) -> None:
    for path in args.files:
        check_utf8(path)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument(
        "--model", required=True, help="output prefix (writes PREFIX.model and PREFIX.vocab)"
    )
    t.add_argument("--vocab-size", type=int, default=8000)
    t.add_argument("--character-coverage", type=float, default=1.0)
    t.add_argument("--input-sentence-size", type=int, default=2_000_000)
    t.add_argument(
        "--user-defined-symbols", default="", help="comma-separated pieces kept whole (e.g. UNK)"
    )
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
    c.add_argument(
        "--max-words", type=int, default=0, help="also drop pairs longer than this (0: no limit)"
    )
    c.set_defaults(fn=clean_pair)
    u = sub.add_parser("check-utf8")
    u.add_argument("files", nargs="+")
    u.set_defaults(fn=check_files)
    args = p.parse_args(argv)
    try:
        args.fn(args)
    except OSError as exc:  # a missing input, a full disk: nothing is kept under a final name
        full = (
            " (free space there and run again)" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else ""
        )
        sys.exit(
            f"spm.py: error: {exc.filename or 'a file'}: {exc.strerror}{full}. Nothing was kept"
        )


if __name__ == "__main__":
    main()

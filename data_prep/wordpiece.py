#!/usr/bin/env python
"""Encode text with a converted checkpoint's own WordPiece tokenizer, and decode hypotheses.

    python data_prep/wordpiece.py encode --tokenizer DIR [--input FILE] [--output FILE]
        [--max-tokens N]
    python data_prep/wordpiece.py decode --tokenizer DIR [--input FILE] [--output FILE]

BERT (Devlin et al. 2019, section 3) and the models built on its vocabulary (ProphetNet,
UniLM, MiniLM, ...) use WordPiece embeddings with a 30,000 token vocabulary: a word is split
into pieces of the vocabulary, every piece after the first written with a ``##`` prefix
("playing" -> ``play ##ing``). A checkpoint converted from a transformers folder keeps that
vocabulary as its fairseq ``dict.txt`` (exactly the strings of ``vocab.txt``), so the text
must be split by the same tokenizer before binarization:

    python data_prep/wordpiece.py encode --tokenizer HF_DIR --input train.src --output train.wp.src
    fairseq-preprocess --srcdict CONVERTED/dict.txt --tgtdict CONVERTED/dict.txt \\
        --trainpref train.wp ... (one encode per split and side)
    fairseq-train ... ; fairseq-generate ... | grep ^H- | sort -V | cut -f3 > hyp.wp
    python data_prep/wordpiece.py decode --tokenizer HF_DIR --input hyp.wp --output hyp.txt
    sacrebleu ref.txt < hyp.txt   (or the ROUGE scorer)

DIR is the transformers folder: ``tokenizer.json`` is used when present (it must hold a
WordPiece model), else ``vocab.txt`` or ``prophetnet.tokenizer`` (ProphetNet's name for the
same file) with BERT's normalisation and pre-tokenization, in lower case unless
``tokenizer_config.json`` says ``"do_lower_case": false`` (its ``strip_accents``,
``tokenize_chinese_chars`` and ``unk_token`` are honoured too). The tokenizer itself is
``fairseq_ext.wordpiece.tokenizer`` (the Python API uses the same one); only the ``tokenizers``
library is needed; nothing is downloaded.

encode: one line of space-separated pieces per input line, without [CLS]/[SEP] (fairseq adds
its own begin/end symbols); the line count is kept (an empty line stays empty). Lines are
split on "\\n" only, so a stray "\\r" or other Unicode separator inside a line never changes the
count. ``--max-tokens N`` keeps the first N pieces of a line and reports on stderr how many
lines were cut.

decode: joins the pieces as BERT does (a ``##`` piece glues to the previous one; the
tokenizer's WordPiece decoder also removes the space before ``. , ? !``, "hello ," ->
"hello,", but keeps "dog ' s", as transformers' own decode does). fairseq's own symbols
(``<unk>``, ``<s>``, ``</s>``, ``<pad>``, ``<mask>``), which
fairseq-generate may print, are dropped; the checkpoint's own special tokens ([UNK], [SEP],
...) are kept unless ``--drop-checkpoint-specials`` is given. Since BERT's normaliser
lowercases (uncased checkpoints) and splits punctuation, score against references that went
through the same normalisation if exact casing matters.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Iterator
from typing import TextIO

from fairseq_ext.wordpiece.tokenizer import (
    FAIRSEQ_SPECIALS,
    WordpieceError,
    checkpoint_specials,
    decode_lines,
    encode_lines,
    load_tokenizer,
)

CHUNK = 2000  # lines per encode_batch call


def _chunks(stream: Iterable[str], size: int = CHUNK) -> Iterator[list[str]]:
    chunk: list[str] = []
    for line in stream:
        chunk.append(line)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _open_input(path: str | None) -> TextIO:
    if path is None:
        if hasattr(sys.stdin, "reconfigure"):
            sys.stdin.reconfigure(encoding="utf-8", newline="\n")
        return sys.stdin
    if os.path.isdir(path):
        raise WordpieceError(f"--input {path} is a folder; pass a text file, one sentence a line")
    try:
        return open(path, encoding="utf-8", newline="\n")
    except OSError as e:
        raise WordpieceError(
            f"cannot read --input {path} ({e.strerror}); check the path and its permissions"
        ) from None


def _open_output(path: str | None, input_path: str | None) -> TextIO:
    if path is None:
        if hasattr(sys.stdout, "reconfigure"):
            sys.stdout.reconfigure(encoding="utf-8", newline="\n")
        return sys.stdout
    if input_path is not None and os.path.exists(path) and os.path.samefile(path, input_path):
        raise WordpieceError(f"--output {path} is the --input file; write to another file")
    try:
        return open(path, "w", encoding="utf-8", newline="\n")
    except OSError as e:
        raise WordpieceError(
            f"cannot write --output {path} ({e.strerror}); check the folder exists and is writable"
        ) from None


def _run(args: argparse.Namespace) -> None:
    tok = load_tokenizer(args.tokenizer)
    src = _open_input(args.input)
    dst = _open_output(args.output, args.input)
    name = args.input or "stdin"
    total = truncated = 0
    try:
        try:
            for chunk in _chunks(src):
                if args.cmd == "encode":
                    lines, cut = encode_lines(tok, chunk, args.max_tokens)
                    truncated += cut
                else:
                    drop = FAIRSEQ_SPECIALS | (
                        checkpoint_specials(tok) if args.drop_checkpoint_specials else set()
                    )
                    lines = decode_lines(tok, chunk, drop)
                dst.writelines(line + "\n" for line in lines)
                total += len(chunk)
        except UnicodeDecodeError:
            raise WordpieceError(
                f"{name} is not UTF-8 text (after line {total}); convert it, e.g. with "
                f"iconv -t UTF-8"
            ) from None
        dst.flush()
    finally:
        if args.input is not None:
            src.close()
        if args.output is not None:
            dst.close()
    if args.cmd == "encode" and args.max_tokens is not None:
        print(
            f"wordpiece: truncated {truncated} of {total} lines to --max-tokens {args.max_tokens}",
            file=sys.stderr,
        )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    for cmd, help_ in (
        ("encode", "raw text -> space-separated WordPiece tokens"),
        ("decode", "space-separated WordPiece tokens (hypotheses) -> text"),
    ):
        s = sub.add_parser(cmd, help=help_)
        s.add_argument(
            "--tokenizer",
            required=True,
            help="transformers checkpoint folder with tokenizer.json, vocab.txt or "
            "prophetnet.tokenizer",
        )
        s.add_argument("--input", help="input file (default: stdin), one sentence a line, UTF-8")
        s.add_argument("--output", help="output file (default: stdout)")
        if cmd == "encode":
            s.add_argument(
                "--max-tokens", type=int, help="keep at most N tokens a line (reported on stderr)"
            )
        else:
            s.add_argument(
                "--drop-checkpoint-specials",
                action="store_true",
                help="also drop the checkpoint's special tokens "
                "([CLS], [SEP], [PAD], [MASK], [UNK])",
            )
    args = p.parse_args(argv)
    if getattr(args, "max_tokens", None) is not None and args.max_tokens < 1:
        p.error("--max-tokens must be >= 1")
    try:
        _run(args)
    except WordpieceError as e:
        sys.exit(f"wordpiece: error: {e}")
    except BrokenPipeError:  # e.g. piped into head
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)


if __name__ == "__main__":
    main()

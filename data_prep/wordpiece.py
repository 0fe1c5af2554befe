#!/usr/bin/env python
"""Encode text with a converted checkpoint's own WordPiece tokenizer, and decode hypotheses.

    python data_prep/wordpiece.py encode --tokenizer DIR [--input FILE] [--output FILE] [--max-tokens N]
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
WordPiece model), else ``vocab.txt`` with BERT's normalisation and pre-tokenization, in
lower case unless ``tokenizer_config.json`` says ``"do_lower_case": false`` (its
``strip_accents``, ``tokenize_chinese_chars`` and ``unk_token`` are honoured too). Only the
``tokenizers`` library is needed; nothing is downloaded.

encode: one line of space-separated pieces per input line, without [CLS]/[SEP] (fairseq adds
its own begin/end symbols); the line count is kept (an empty line stays empty). Lines are
split on "\\n" only, so a stray "\\r" or other Unicode separator inside a line never changes the
count. ``--max-tokens N`` keeps the first N pieces of a line and reports on stderr how many
lines were cut.

decode: joins the pieces as BERT does (a ``##`` piece glues to the previous one; the
tokenizer's WordPiece decoder also removes the space before ``. , ? !``, "hello ," ->
"hello,", but keeps "dog ' s", as transformers' own decode does). fairseq's own symbols (``<unk>``, ``<s>``, ``</s>``, ``<pad>``, ``<mask>``), which
fairseq-generate may print, are dropped; the checkpoint's own special tokens ([UNK], [SEP],
...) are kept unless ``--drop-checkpoint-specials`` is given. Since BERT's normaliser
lowercases (uncased checkpoints) and splits punctuation, score against references that went
through the same normalisation if exact casing matters.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TextIO

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers

FAIRSEQ_SPECIALS = frozenset({"<unk>", "<s>", "</s>", "<pad>", "<mask>"})
BERT_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
CHUNK = 2000  # lines per encode_batch call


class WordpieceError(ValueError):
    """A problem with the user's input; the message names it and the fix (printed as one line)."""


def _token_string(value: object) -> str | None:
    """A special token as tokenizer_config.json writes it: a string or {"content": ...}."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _read_config(folder: Path) -> dict:
    path = folder / "tokenizer_config.json"
    if not path.is_file():
        return {}
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise WordpieceError(f"cannot read {path} ({e}); fix or remove it (do_lower_case then defaults to true)") from None
    if not isinstance(config, dict):
        raise WordpieceError(f"{path} is not a JSON object; fix or remove it")
    return config


def _from_vocab(vocab_file: Path, config: dict) -> Tokenizer:
    """BERT's tokenizer on vocab.txt: BertNormalizer + BertPreTokenizer + WordPiece (as
    tokenizers.BertWordPieceTokenizer builds it), options from tokenizer_config.json."""
    try:
        lines = vocab_file.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as e:
        raise WordpieceError(f"cannot read {vocab_file} ({e}); it must be a UTF-8 file with one token a line") from None
    if lines and lines[-1] == "":
        lines.pop()
    vocab = {tok.rstrip("\r"): i for i, tok in enumerate(lines)}
    if not vocab:
        raise WordpieceError(f"{vocab_file} is empty; it must list the WordPiece tokens, one a line")
    unk = _token_string(config.get("unk_token")) or "[UNK]"
    if unk not in vocab:
        raise WordpieceError(f"the unknown token {unk!r} is not in {vocab_file}; add it to the vocabulary "
                             f"or set \"unk_token\" in tokenizer_config.json")
    lowercase = config.get("do_lower_case", True)
    lowercase = True if lowercase is None else bool(lowercase)
    strip_accents = config.get("strip_accents")
    chinese = config.get("tokenize_chinese_chars", True)
    tok = Tokenizer(models.WordPiece(vocab, unk_token=unk, max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True if chinese is None else bool(chinese),
        strip_accents=None if strip_accents is None else bool(strip_accents), lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    specials = list(BERT_SPECIALS)
    for key, value in config.items():
        if key.endswith("_token") and _token_string(value):
            specials.append(_token_string(value))
    for value in config.get("additional_special_tokens") or []:
        if _token_string(value):
            specials.append(_token_string(value))
    present = [s for s in dict.fromkeys(specials) if s in vocab]
    tok.add_special_tokens([AddedToken(s, normalized=False) for s in present])
    return tok


def load_tokenizer(path: str | os.PathLike) -> Tokenizer:
    """The WordPiece tokenizer of a transformers folder: ``DIR/tokenizer.json`` if present, else
    one built from ``DIR/vocab.txt`` (+ ``tokenizer_config.json``). Truncation and padding stored
    in tokenizer.json are switched off. Raises ``WordpieceError`` on bad input."""
    folder = Path(path)
    if not folder.is_dir():
        raise WordpieceError(f"tokenizer folder {folder} does not exist; pass --tokenizer the transformers "
                             f"checkpoint folder (the one with tokenizer.json or vocab.txt)")
    json_file, vocab_file = folder / "tokenizer.json", folder / "vocab.txt"
    if json_file.is_file():
        try:
            tok = Tokenizer.from_file(str(json_file))
        except Exception as e:  # the Rust library raises a plain Exception
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise WordpieceError(f"cannot load {json_file} ({first}); re-save it with a recent tokenizers/transformers "
                                 f"or remove it to use vocab.txt") from None
        if not isinstance(tok.model, models.WordPiece):
            raise WordpieceError(f"{json_file} holds a {type(tok.model).__name__} model, not WordPiece; this script "
                                 f"is for BERT-family vocabularies (use data_prep/spm.py or the checkpoint's own "
                                 f"tokenizer for others)")
        tok.no_truncation()
        tok.no_padding()
        if tok.decoder is None:
            tok.decoder = decoders.WordPiece(prefix=tok.model.continuing_subword_prefix)
        return tok
    if vocab_file.is_file():
        return _from_vocab(vocab_file, _read_config(folder))
    raise WordpieceError(f"{folder} has neither tokenizer.json nor vocab.txt; pass --tokenizer the transformers "
                         f"checkpoint folder that holds them")


def encode_lines(tok: Tokenizer, lines: Iterable[str], max_tokens: int | None = None) -> tuple[list[str], int]:
    """Encode each line (a trailing newline is ignored) without special tokens. Returns the
    space-separated pieces, one string per line, and how many lines ``max_tokens`` cut."""
    texts = [line.rstrip("\n") for line in lines]
    if max_tokens is not None and max_tokens < 1:
        raise WordpieceError(f"max_tokens must be >= 1, got {max_tokens}")
    out, truncated = [], 0
    for enc in tok.encode_batch(texts, add_special_tokens=False) if texts else []:
        tokens = enc.tokens
        if max_tokens is not None and len(tokens) > max_tokens:
            tokens = tokens[:max_tokens]
            truncated += 1
        line = " ".join(tokens)
        if len(line.split()) != len(tokens):
            bad = next(t for t in tokens if not t or any(c.isspace() for c in t))
            raise WordpieceError(f"the tokenizer produced the token {bad!r}, which holds whitespace and cannot be "
                                 f"written space-separated; remove it from the tokenizer's added tokens")
        out.append(line)
    return out, truncated


def decode_lines(tok: Tokenizer, lines: Iterable[str], drop: Iterable[str] = FAIRSEQ_SPECIALS) -> list[str]:
    """Join each line's space-separated WordPiece tokens into text with the tokenizer's decoder,
    dropping the tokens in ``drop`` (by default fairseq's ``<unk> <s> </s> <pad> <mask>``)."""
    drop = frozenset(drop)
    decoder = tok.decoder or decoders.WordPiece(prefix="##")
    return [decoder.decode([t for t in line.split() if t not in drop]) for line in lines]


def checkpoint_specials(tok: Tokenizer) -> set[str]:
    """The tokenizer's special tokens ([CLS], [SEP], [PAD], [MASK], [UNK], ...)."""
    return {t.content for t in tok.get_added_tokens_decoder().values() if t.special}


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
        raise WordpieceError(f"cannot read --input {path} ({e.strerror}); check the path and its permissions") from None


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
        raise WordpieceError(f"cannot write --output {path} ({e.strerror}); check the folder exists and is writable") \
            from None


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
                    drop = FAIRSEQ_SPECIALS | (checkpoint_specials(tok) if args.drop_checkpoint_specials else set())
                    lines = decode_lines(tok, chunk, drop)
                dst.writelines(line + "\n" for line in lines)
                total += len(chunk)
        except UnicodeDecodeError:
            raise WordpieceError(f"{name} is not UTF-8 text (after line {total}); convert it, e.g. with "
                                 f"iconv -t UTF-8") from None
        dst.flush()
    finally:
        if args.input is not None:
            src.close()
        if args.output is not None:
            dst.close()
    if args.cmd == "encode" and args.max_tokens is not None:
        print(f"wordpiece: truncated {truncated} of {total} lines to --max-tokens {args.max_tokens}", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    for cmd, help_ in (("encode", "raw text -> space-separated WordPiece tokens"),
                       ("decode", "space-separated WordPiece tokens (hypotheses) -> text")):
        s = sub.add_parser(cmd, help=help_)
        s.add_argument("--tokenizer", required=True,
                       help="transformers checkpoint folder with tokenizer.json and/or vocab.txt")
        s.add_argument("--input", help="input file (default: stdin), one sentence a line, UTF-8")
        s.add_argument("--output", help="output file (default: stdout)")
        if cmd == "encode":
            s.add_argument("--max-tokens", type=int, help="keep at most N tokens a line (reported on stderr)")
        else:
            s.add_argument("--drop-checkpoint-specials", action="store_true",
                           help="also drop the checkpoint's special tokens ([CLS], [SEP], [PAD], [MASK], [UNK])")
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

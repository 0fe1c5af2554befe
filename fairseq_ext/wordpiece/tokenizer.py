"""A transformers checkpoint's own WordPiece tokenizer (Devlin et al. 2019, section 3), offline:
``tokenizer.json``, else ``vocab.txt`` or ``prophetnet.tokenizer`` with BERT's normalisation and
the options of ``tokenizer_config.json``."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers

from fairseq_ext.common.errors import FairseqExtError

FAIRSEQ_SPECIALS = frozenset({"<unk>", "<s>", "</s>", "<pad>", "<mask>"})
BERT_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
VOCABULARY_FILES = ("vocab.txt", "prophetnet.tokenizer")
BERT_ON = ("tokenize_chinese_chars", "do_lower_case")  # settings on unless set false


class WordpieceError(FairseqExtError):
    """A problem with the user's input; the message names it and the fix (printed as one line)."""


def _token_string(value: object) -> str | None:
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
        raise WordpieceError(
            f"cannot read {path} ({e}); fix or remove it (do_lower_case then defaults to true)"
        ) from None
    if not isinstance(config, dict):
        raise WordpieceError(f"{path} is not a JSON object; fix or remove it")
    return config


def _from_vocab(vocab_file: Path, config: dict) -> Tokenizer:
    """BERT's tokenizer on a vocabulary file, as ``tokenizers.BertWordPieceTokenizer`` builds it."""
    try:
        lines = vocab_file.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as e:
        raise WordpieceError(
            f"cannot read {vocab_file} ({e}); it must be a UTF-8 file with one token a line"
        ) from None
    if lines and lines[-1] == "":
        lines.pop()
    vocab = {tok.rstrip("\r"): i for i, tok in enumerate(lines)}
    if not vocab:
        raise WordpieceError(
            f"{vocab_file} is empty; it must list the WordPiece tokens, one a line"
        )
    unk = _token_string(config.get("unk_token")) or "[UNK]"
    if unk not in vocab:
        raise WordpieceError(
            f"the unknown token {unk!r} is not in {vocab_file}; add it to the vocabulary "
            f'or set "unk_token" in tokenizer_config.json'
        )
    strip_accents = config.get("strip_accents")
    on = {key: config.get(key) is None or bool(config[key]) for key in BERT_ON}
    tok = Tokenizer(models.WordPiece(vocab, unk_token=unk, max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True,
        handle_chinese_chars=on["tokenize_chinese_chars"],
        strip_accents=None if strip_accents is None else bool(strip_accents),
        lowercase=on["do_lower_case"],
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    named = [value for key, value in config.items() if key.endswith("_token")]
    found = map(_token_string, [*named, *(config.get("additional_special_tokens") or [])])
    present = [s for s in dict.fromkeys([*BERT_SPECIALS, *found]) if s and s in vocab]
    tok.add_special_tokens([AddedToken(s, normalized=False) for s in present])
    return tok


def vocabulary_file(folder: Path) -> Path | None:
    """``vocab.txt`` (BERT) or ``prophetnet.tokenizer`` (transformers' ``ProphetNetTokenizer``)."""
    return next((folder / name for name in VOCABULARY_FILES if (folder / name).is_file()), None)


def load_tokenizer(path: str | os.PathLike) -> Tokenizer:
    """The WordPiece tokenizer of a transformers folder, truncation and padding off."""
    folder = Path(path)
    if not folder.is_dir():
        raise WordpieceError(
            f"tokenizer folder {folder} does not exist; pass --tokenizer the transformers "
            f"checkpoint folder (the one with tokenizer.json, vocab.txt or prophetnet.tokenizer)"
        )
    json_file = folder / "tokenizer.json"
    if json_file.is_file():
        try:
            tok = Tokenizer.from_file(str(json_file))
        except Exception as e:  # the Rust library raises a plain Exception
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise WordpieceError(
                f"cannot load {json_file} ({first}); re-save it with a recent "
                "tokenizers/transformers or remove it to use vocab.txt"
            ) from None
        if not isinstance(tok.model, models.WordPiece):
            raise WordpieceError(
                f"{json_file} holds a {type(tok.model).__name__} model, not WordPiece; this script "
                f"is for BERT-family vocabularies (use data_prep/spm.py or the checkpoint's own "
                f"tokenizer for others)"
            )
        tok.no_truncation()
        tok.no_padding()
        if tok.decoder is None:
            tok.decoder = decoders.WordPiece(prefix=tok.model.continuing_subword_prefix)
        return tok
    vocab_file = vocabulary_file(folder)
    if vocab_file is not None:
        return _from_vocab(vocab_file, _read_config(folder))
    raise WordpieceError(
        f"{folder} has none of tokenizer.json, {', '.join(VOCABULARY_FILES)}; pass --tokenizer "
        f"the transformers checkpoint folder that holds them"
    )


def encode_lines(
    tok: Tokenizer, lines: Iterable[str], max_tokens: int | None = None
) -> tuple[list[str], int]:
    """Space-separated pieces per line (no special tokens), and how many lines ``max_tokens``
    cut."""
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
            raise WordpieceError(
                f"the tokenizer produced the token {bad!r}, which holds whitespace and cannot be "
                f"written space-separated; remove it from the tokenizer's added tokens"
            )
        out.append(line)
    return out, truncated


def decode_lines(
    tok: Tokenizer, lines: Iterable[str], drop: Iterable[str] = FAIRSEQ_SPECIALS
) -> list[str]:
    """Text from each line's pieces, without the tokens in ``drop``."""
    drop = frozenset(drop)
    decoder = tok.decoder or decoders.WordPiece(prefix="##")
    return [decoder.decode([t for t in line.split() if t not in drop]) for line in lines]


def checkpoint_specials(tok: Tokenizer) -> set[str]:
    """The tokenizer's special tokens ([CLS], [SEP], [PAD], [MASK], [UNK], ...)."""
    return {t.content for t in tok.get_added_tokens_decoder().values() if t.special}

"""A WordPiece vocabulary (BERT, ProphetNet) as a fairseq dictionary, row for row: fairseq's
``<s> <pad> </s> <unk>`` are ``[CLS] [PAD] [SEP] [UNK]``, ``<mask>`` is ``[MASK]``, the other
tokens keep their order (docs/pretrained.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Tuple

import torch
from torch import Tensor

from fairseq_ext.common.errors import FairseqExtError, require

FAIRSEQ_SPECIALS = (
    ("<s>", "cls_token"),
    ("<pad>", "pad_token"),
    ("</s>", "sep_token"),
    ("<unk>", "unk_token"),
)
MASK = ("<mask>", "mask_token")
DICTIONARIES = ("dict.txt", "dict.src.txt", "dict.tgt.txt")  # a conversion's data folder


def fairseq_rows(vocab: List[str], specials: Dict[str, str]) -> Tuple[List[str], Tensor]:
    """``(dict_tokens, rows)``: the words of ``dict.txt``, and the checkpoint id of every
    fairseq id (``<mask>`` appended)."""
    index = {}
    for i, token in enumerate(vocab):
        require(
            token and not any(c.isspace() for c in token),
            f"vocabulary entry {i} ({token!r}) is empty or contains whitespace, which a fairseq "
            "dict.txt cannot hold",
        )
        require(
            token not in index, f"vocabulary entry {i} ({token!r}) repeats entry {index.get(token)}"
        )
        index[token] = i
    special_ids = []
    for symbol, role in (*FAIRSEQ_SPECIALS, MASK):
        token = specials.get(role)
        require(
            token in index,
            f"the vocabulary has no {role} {token!r}; fairseq's {symbol} needs it "
            "(check special_tokens_map.json)",
        )
        special_ids.append(index[token])
    require(
        len(set(special_ids)) == len(special_ids),
        f"the special tokens {[vocab[i] for i in special_ids]} are not distinct; fairseq needs "
        "<s>, <pad>, </s>, <unk> and <mask> on different rows",
    )
    reserved = {s for s, _ in (*FAIRSEQ_SPECIALS, MASK)}
    clash = [t for t in vocab if t in reserved]
    if clash:
        raise FairseqExtError(
            f"the vocabulary has the token {clash[0]!r}, one of fairseq's own symbols, "
            "as an ordinary word; it cannot be mapped to a fairseq dictionary"
        )
    taken = set(special_ids)
    words = [i for i in range(len(vocab)) if i not in taken]
    rows = special_ids[:4] + words + special_ids[4:]
    return [vocab[i] for i in words], torch.tensor(rows, dtype=torch.long)


def write_dict(path, tokens: List[str]) -> None:
    """A fairseq ``dict.txt`` in id order (placeholder counts)."""
    Path(path).write_text("".join(f"{t} 1\n" for t in tokens), encoding="utf-8")


def inverse(rows: Tensor) -> Tensor:
    """``out[rows[i]] = i``: the fairseq id of every checkpoint id."""
    out = torch.empty_like(rows)
    out[rows] = torch.arange(len(rows))
    return out


def checkpoint_rows(symbols: List[str], vocab: List[str], specials: Dict[str, str]) -> Tensor:
    """The fairseq id of every checkpoint id of ``vocab`` (``symbols``: ``fairseq_rows``'s
    dictionary)."""
    words, rows = fairseq_rows(vocab, specials)
    expected = [s for s, _ in FAIRSEQ_SPECIALS] + words + [MASK[0]]
    if list(symbols) != expected:
        first = next(
            i
            for i, (a, b) in enumerate(zip(list(symbols) + [None] * len(expected), expected))
            if a != b
        )
        theirs = symbols[first] if first < len(symbols) else "(nothing)"
        raise FairseqExtError(
            f"vocabulary mismatch: the model's dictionary has {theirs!r} at id {first} where "
            f"the vocabulary gives {expected[first]!r}; give the vocab.txt the model was "
            "converted from (or none, to export the model's own dictionary)"
        )
    return inverse(rows)

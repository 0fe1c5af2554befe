"""A WordPiece vocabulary (BERT, ProphetNet) as a fairseq dictionary, row for row.

fairseq's dictionary starts with its own four symbols ``<s> <pad> </s> <unk>`` (ids 0-3),
then the words of ``dict.txt``; the tasks of this plugin append ``<mask>``. BERT's vocabulary
has its specials elsewhere (uncased BERT: ``[PAD]`` 0, ``[UNK]`` 100, ``[CLS]`` 101, ``[SEP]``
102, ``[MASK]`` 103). The mapping is one-to-one:

====================  ==========================  ============================================
fairseq id            symbol                      checkpoint token
====================  ==========================  ============================================
0                     ``<s>``                     ``cls_token`` (``[CLS]``)
1                     ``<pad>``                   ``pad_token`` (``[PAD]``)
2                     ``</s>``                    ``sep_token`` (``[SEP]``; ProphetNet's bos/eos)
3                     ``<unk>``                   ``unk_token`` (``[UNK]``)
4 .. V - 2            ``dict.txt`` in vocab order every other token, in the checkpoint's order
V - 1                 ``<mask>`` (the task's)     ``mask_token`` (``[MASK]``)
====================  ==========================  ============================================

so ``<s> x </s>`` is ``[CLS] x [SEP]``, and ``rows[i]`` (the checkpoint id of fairseq id ``i``)
permutes every vocabulary-sized parameter. A data set encoded with the checkpoint's own
tokenizer (``data_prep/wordpiece.py``) and binarized with ``fairseq-preprocess --srcdict
dict.txt`` then gives the model the ids it was trained on.
"""

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


def fairseq_rows(vocab: List[str], specials: Dict[str, str]) -> Tuple[List[str], Tensor]:
    """``(dict_tokens, rows)``: the words of ``dict.txt`` and, for every fairseq id of the
    dictionary with ``<mask>`` appended, the checkpoint id it takes its row from."""
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
    """A fairseq ``dict.txt``: one ``token count`` line per word, in id order (the counts are
    placeholders: nothing of this plugin or fairseq reads them once the dictionary exists)."""
    Path(path).write_text("".join(f"{t} 1\n" for t in tokens), encoding="utf-8")


def inverse(rows: Tensor) -> Tensor:
    """``out[rows[i]] = i``: the fairseq id of every checkpoint id."""
    out = torch.empty_like(rows)
    out[rows] = torch.arange(len(rows))
    return out


def checkpoint_rows(symbols: List[str], vocab: List[str], specials: Dict[str, str]) -> Tensor:
    """The inverse direction: for every checkpoint id of ``vocab``, the fairseq id (of the
    dictionary ``symbols``, ``<mask>`` included) it takes its row from. ``symbols`` must be
    the dictionary ``fairseq_rows`` made of this vocabulary."""
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

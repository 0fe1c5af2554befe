"""Checks of binarized data, shared by every task of the plugin: lines that a model would
otherwise skip, clamp or learn as garbage, a split or dictionary that is missing, an empty
split, and files that fairseq would fail on deep inside numpy, are refused with one clear
message naming the split, the line or file, and the fix; an evaluation split with a share of
``<unk>`` that only another tokenizer gives is named in one line (``note_unknown_share``)."""

from __future__ import annotations

import glob
import os
import struct
from typing import Optional

import numpy as np
from fairseq import utils
from fairseq.data import data_utils, indexed_dataset

from fairseq_ext.common.errors import FairseqExtError, note, require
from fairseq_ext.data.folder_checks import check_data_folder

UNKNOWN_SHARE = (
    0.01  # a split whose share of <unk> is above this was likely encoded with another tokenizer
)
REMOVE_EMPTY_LINES = (
    "remove empty lines or pairs before fairseq-preprocess (data_prep/spm.py clean-pair "
    "does this for training data)"
)


def refuse_missing_dictionary(path: str) -> None:
    """The dictionary ``path`` (``dict.LANG.txt`` or ``dict.txt``, which fairseq-preprocess writes
    beside the binarized splits) exists; fairseq would stop with a bare ``FileNotFoundError``."""
    require(
        os.path.isfile(path),
        f"{path} does not exist: give the data directory fairseq-preprocess wrote (its "
        "--destdir holds dict.*.txt beside the binarized splits), with the languages "
        "(-s/-t) it was binarized with",
    )


def refuse_missing_data_folder(data: str) -> None:
    """Every folder of ``--data`` (``:``-separated) is a readable folder whose dictionaries are not
    cut short (``folder_checks.check_data_folder``); fairseq would stop with a bare
    ``FileNotFoundError`` from deep inside its task set-up."""
    for folder in utils.split_paths(data):
        check_data_folder(folder)


def refuse_unnamed_language_pair(cfg) -> None:
    """A translation-style task's data folders exist, and where ``-s``/``-t`` are not given its
    first folder holds a binarized pair to infer them from (fairseq's ``infer_language_pair``);
    fairseq would stop with a bare exception."""
    refuse_missing_data_folder(cfg.data)
    if cfg.source_lang is None or cfg.target_lang is None:
        folder = utils.split_paths(cfg.data)[0]
        require(
            data_utils.infer_language_pair(folder) != (None, None),
            f"{folder} holds no binarized pair (train.SRC-TGT.SRC.idx) to infer the languages "
            "from: give -s and -t, the languages fairseq-preprocess binarized",
        )


def first_bad_row(bad: np.ndarray) -> Optional[int]:
    """The 0-based index of the first True in ``bad``, or None."""
    rows = np.flatnonzero(bad)
    return int(rows[0]) if len(rows) else None


def refuse_empty_lines(
    sizes: np.ndarray,
    *,
    split: str,
    row_name: str,
    data: str,
    markers: tuple[str, ...] = ("</s>",),
    fix: str = REMOVE_EMPTY_LINES,
) -> None:
    """Every line needs a token besides the ``markers`` that ``sizes`` count."""
    bad = np.asarray(sizes) <= len(markers)
    row = first_bad_row(bad)
    if row is not None:
        raise FairseqExtError(
            f"{split} {row_name} {row + 1} is empty: it has only {' and '.join(markers)} "
            f"({int(bad.sum())} of the {len(bad)} in {data}); {fix}"
        )


def refuse_long_lines(
    sizes: np.ndarray,
    *,
    split: str,
    row_name: str,
    limit: int,
    option: Optional[str] = None,
    limit_name: Optional[str] = None,
    fix: Optional[str] = None,
    markers: tuple[str, ...] = (),
) -> None:
    """No line longer than ``limit`` tokens (the message says the count includes ``markers``).
    ``option`` names the option that sets the limit; ``limit_name`` (where the limit comes
    from) and ``fix`` replace what the message says by default: the option, its value and how
    to raise it."""
    limit_name = limit_name or f"{option} {limit}"
    fix = fix or (
        f"split or filter long lines before fairseq-preprocess (a larger {option} helps only a "
        "model trained with it: a trained model keeps the positions it was trained with)"
    )
    counted = f" with {' and '.join(markers)}" if markers else ""
    sizes = np.asarray(sizes)
    bad = sizes > limit
    row = first_bad_row(bad)
    if row is not None:
        raise FairseqExtError(
            f"{split} {row_name} {row + 1} has {int(sizes[row])} tokens{counted}, more than "
            f"{limit_name} ({int(bad.sum())} of the {len(bad)}); {fix}"
        )


def check_pair_split(
    dataset,
    *,
    split: str,
    data: str,
    unk: int,
    evaluation: bool,
    markers: tuple[str, ...] = ("</s>",),
    long_lines: tuple = (),
) -> None:
    """The checks of a ``LanguagePairDataset``: no empty line on either side, none longer than
    each ``(side, refuse_long_lines' keywords)`` of ``long_lines`` allows, and for an
    ``evaluation`` split each side's share of ``<unk>`` (``note_unknown_share``)."""
    sides = {"source": (dataset.src_sizes, dataset.src), "target": (dataset.tgt_sizes, dataset.tgt)}
    for side, (sizes, _) in sides.items():
        if sizes is not None:
            refuse_empty_lines(
                sizes, split=split, row_name=f"{side} line", data=data, markers=markers
            )
    for side, rule in long_lines:
        if sides[side][0] is not None:
            refuse_long_lines(sides[side][0], split=split, row_name=f"{side} line", **rule)
    for side, (_, tokens) in sides.items():
        if evaluation and tokens is not None:
            note_unknown_share(tokens, unk, split=split, side=side, data=data)


def _index(prefix: str) -> Optional[tuple[int, int]]:
    """``(lines, bytes of prefix.bin)`` that ``prefix.idx`` indexes (fairseq's mmap and cached
    formats; None for another format)."""
    impl = indexed_dataset.infer_dataset_impl(prefix)
    if impl == "mmap":
        index = indexed_dataset.MMapIndexedDataset.Index(indexed_dataset.index_file_path(prefix))
        if len(index) == 0:
            return 0, 0
        pointer, size = index[len(index) - 1]
        return len(index), int(pointer) + int(size) * np.dtype(index.dtype).itemsize
    if impl == "cached":
        index = indexed_dataset.IndexedDataset(prefix)
        return len(index), int(index.data_offsets[-1]) * index.element_size
    return None


_SPLIT_OPTION = {"train": "--trainpref", "valid": "--validpref", "test": "--testpref"}


def _split_indexes(folder: str, split: str) -> set[str]:
    stem = glob.escape(os.path.join(folder, split))
    return {*glob.glob(stem + ".idx"), *glob.glob(stem + ".*.idx"), *glob.glob(stem + "[0-9]*.idx")}


def refuse_truncated_binaries(data: str, split: str) -> None:
    """``split`` was binarized into the ``data`` folders (fairseq would stop with a bare
    ``FileNotFoundError``), and each ``.idx`` of it (shards ``split1``, ... included) indexes at
    least one line and no more bytes than its ``.bin`` has: an interrupted fairseq-preprocess or
    copy leaves it shorter, and fairseq would fail inside numpy past its end."""
    folders = utils.split_paths(data)
    indexes = sorted(i for folder in folders for i in _split_indexes(folder, split))
    if not indexes:
        found = sorted(
            {
                os.path.basename(i).split(".")[0]
                for folder in folders
                for i in glob.glob(os.path.join(glob.escape(folder), "*.idx"))
            }
        )
        option = _SPLIT_OPTION.get(split.rstrip("0123456789"), "--testpref (or --validpref)")
        raise FairseqExtError(
            f"Dataset not found: {split} (no {split}*.idx in {data}); binarize it with "
            f"fairseq-preprocess {option} PREFIX --destdir {folders[0]} (with the same "
            f"dictionaries), or name a split the folder has ({', '.join(found) or 'none'}) with "
            "--gen-subset/--valid-subset"
        )
    for index in indexes:
        prefix = index[: -len(".idx")]
        try:
            found = _index(prefix)
        except (AssertionError, ValueError, struct.error) as exc:
            raise FairseqExtError(
                f"cannot read {index} ({type(exc).__name__}): the binarized {split} split is "
                "incomplete or not made by fairseq-preprocess; binarize it again with "
                "fairseq-preprocess"
            ) from None
        if found is None:
            continue
        lines, expected = found
        require(
            lines != 0,
            f"the {split} split {prefix}.{{idx,bin}} is empty (0 lines): binarize it again from a "
            "non-empty text file, or name another split with --gen-subset/--valid-subset",
        )
        actual = os.path.getsize(prefix + ".bin")
        require(
            actual >= expected,
            f"{prefix}.bin has {actual} bytes but {index} indexes {expected}: the binarized "
            f"{split} split is incomplete (an interrupted fairseq-preprocess or copy?); "
            "binarize it again with fairseq-preprocess",
        )


def note_unknown_share(dataset, unk: int, *, split: str, side: str, data: str) -> None:
    """One line on stderr when more than ``UNKNOWN_SHARE`` of the tokens of a binarized split are
    ``<unk>``: a dictionary built from sentencepiece-encoded text holds all its pieces, so the
    split was encoded with another model (or holds a script the vocabulary lacks)."""
    unknown = total = lines = 0
    for i in range(len(dataset)):
        tokens = dataset[i]
        count = int((tokens == unk).sum())
        unknown, lines, total = unknown + count, lines + (count > 0), total + len(tokens)
    if total and unknown > UNKNOWN_SHARE * total:
        note(
            f"{100 * unknown / total:.1f}% of the {side} tokens of the {split} split in {data} are "
            f"<unk> ({unknown} of {total}, in {lines} of its {len(dataset)} lines): it was "
            "probably encoded with another sentencepiece model than the one the dictionary was "
            "built from (or holds characters the vocabulary lacks); encode the text with the "
            "checkpoint's own model (data_prep/spm.py encode --model SPM.model) and binarize it "
            "again"
        )

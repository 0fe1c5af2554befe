#!/usr/bin/env python
"""GLUE CoLA and SST-2 (Wang et al. 2019, "GLUE", section 3) for fine-tuning a converted
checkpoint with fairseq's ``sentence_prediction`` task, the kind of downstream evaluation
Wagner et al. 2020 ("Positional Masking for Language Models", section 5) judge position
masking and the enhanced dropout gradient by.

    python data_prep/glue.py --task CoLA --tokenizer HF_DIR --dict CONVERTED/dict.txt --out OUT
        [--local DIR] [--train-limit N] [--max-tokens 62]

Input: ``train.tsv`` and ``dev.tsv`` of the task, tab-separated, one example a line, in
either layout found in the wild, told apart by the file's first line:

* a header naming a ``label`` column and a ``sentence`` (or ``content``) column, in any
  order (GLUE's SST-2: ``sentence<TAB>label``; other copies: ``label<TAB>content``);
* no header: two columns, the label first or last (whichever column of the first line holds a
  label of the task), or GLUE's four CoLA columns ``source<TAB>label<TAB>mark<TAB>sentence``.

Labels: ``0`` / ``1`` (CoLA: 1 acceptable; SST-2: 1 positive). A row with a missing label, a
label outside that set, or an empty sentence stops the script with one line naming the file
and line number (exit 2); nothing is dropped silently, and what was read and written is
counted on stderr. ``--local DIR``: a folder with the task's ``train.tsv`` and ``dev.tsv``
(or its parent, holding ``TASK/``); without it the task's GLUE archive is downloaded from
``GLUE_URLS`` (never at test time). ``--train-limit N`` keeps N training examples drawn
without replacement with ``random.Random(0)``, in file order (the same N examples on
every run). Sentences are split into the checkpoint's own WordPiece pieces by
``data_prep/wordpiece.py`` (``--max-tokens`` keeps the first N pieces, reported), then
binarized with its ``dict.txt`` (``data_prep/sentence_prediction_data.py``). Output:
OUT/raw/{train,valid}.{input0,label} and OUT/bin/{input0,label}; the label dictionary is
fairseq's (ordered by frequency), so a predicted class c is the label
``OUT/bin/label/dict.txt``'s line c.
"""

from __future__ import annotations

import argparse
import io
import random
import sys
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from sentence_prediction_data import binarize
from wordpiece import WordpieceError, encode_lines, load_tokenizer

LABELS = {"CoLA": ("0", "1"), "SST-2": ("0", "1")}
GLUE_URLS = {
    "CoLA": "https://dl.fbaipublicfiles.com/glue/data/CoLA.zip",
    "SST-2": "https://dl.fbaipublicfiles.com/glue/data/SST-2.zip",
}
TEXT_COLUMNS = ("sentence", "content")
SPLITS = (("train", "train.tsv"), ("valid", "dev.tsv"))


class GlueDataError(ValueError):
    """A problem with the input; the message names the file, the line and the fix."""


@dataclass(frozen=True)
class Layout:
    """Where a file keeps its columns: 0-based label and sentence columns, header or not."""

    label: int
    sentence: int
    header: bool


def detect_layout(path: Path, first: str, labels: tuple[str, ...]) -> Layout:
    """The layout of a TSV file from its first line (see the module docstring)."""
    fields = first.rstrip("\n").rstrip("\r").split("\t")
    names = [f.strip().lower() for f in fields]
    if "label" in names:
        text = [i for i, n in enumerate(names) if n in TEXT_COLUMNS]
        if not text:
            raise GlueDataError(
                f"{path}:1: the header names no sentence column ({' / '.join(TEXT_COLUMNS)}); "
                f"rename the text column"
            )
        return Layout(names.index("label"), text[0], True)
    if len(fields) == 4:  # GLUE's CoLA: source, label, original mark, sentence
        return Layout(1, 3, False)
    if len(fields) == 2:
        if fields[1].strip() in labels:
            return Layout(1, 0, False)
        if fields[0].strip() in labels:
            return Layout(0, 1, False)
    raise GlueDataError(
        f"{path}:1: neither a header with a 'label' column nor a row with a label "
        f"({', '.join(labels)}) first or last; write 'sentence<TAB>label' rows"
    )


def read_tsv(path: Path, labels: tuple[str, ...]) -> list[tuple[str, str]]:
    """(sentence, label) of every row of ``path``; a bad row raises ``GlueDataError``."""
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except FileNotFoundError:
        raise GlueDataError(
            f"{path} does not exist; pass --local the folder with the task's train.tsv and dev.tsv"
        ) from None
    except (OSError, UnicodeDecodeError) as e:
        raise GlueDataError(f"cannot read {path} ({e}); it must be a UTF-8 TSV file") from None
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise GlueDataError(f"{path} is empty; it must hold one example a line")
    layout = detect_layout(path, lines[0], labels)
    rows = []
    for number, line in enumerate(
        lines[1:] if layout.header else lines, start=2 if layout.header else 1
    ):
        fields = line.rstrip("\r").split("\t")
        label = fields[layout.label].strip() if layout.label < len(fields) else ""
        sentence = fields[layout.sentence].strip() if layout.sentence < len(fields) else ""
        if not label:
            raise GlueDataError(
                f"{path}:{number}: the row has no label; give every row a label "
                f"({', '.join(labels)}) or remove it"
            )
        if label not in labels:
            raise GlueDataError(
                f"{path}:{number}: label {label!r} is not one of the task's labels "
                f"({', '.join(labels)}); fix or remove the row"
            )
        if not sentence:
            raise GlueDataError(f"{path}:{number}: the sentence is empty; fix or remove the row")
        rows.append((sentence, label))
    return rows


def subset(rows: list, limit: int | None) -> list:
    """``limit`` rows drawn with ``random.Random(0)``, kept in file order (all rows if None)."""
    if limit is None or limit >= len(rows):
        return rows
    keep = sorted(random.Random(0).sample(range(len(rows)), limit))
    return [rows[i] for i in keep]


def task_folder(local: str | None, task: str, out: Path) -> Path:
    """The folder holding the task's train.tsv and dev.tsv: --local, --local/TASK, or the
    downloaded GLUE archive."""
    if local is not None:
        folder = Path(local)
        if (folder / task / "dev.tsv").is_file() and not (folder / "dev.tsv").is_file():
            folder = folder / task
        if not folder.is_dir():
            raise GlueDataError(
                f"--local {local} is not a folder; pass the folder with {task}'s train.tsv "
                f"and dev.tsv"
            )
        return folder
    url = GLUE_URLS[task]
    print(f"glue: downloading {url}", file=sys.stderr)
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            archive = response.read()
    except OSError as e:
        raise GlueDataError(f"could not download {url} ({e}); offline, pass --local DIR") from None
    download = out / "download"
    zipfile.ZipFile(io.BytesIO(archive)).extractall(download)
    return download / task


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--task", required=True, choices=sorted(LABELS))
    p.add_argument(
        "--local",
        help="folder with the task's train.tsv and dev.tsv (or its parent); "
        "without it the GLUE archive is downloaded",
    )
    p.add_argument(
        "--tokenizer",
        required=True,
        help="the transformers checkpoint folder (tokenizer.json or vocab.txt)",
    )
    p.add_argument("--dict", required=True, help="the converted checkpoint's dict.txt")
    p.add_argument("--out", required=True)
    p.add_argument(
        "--train-limit", type=int, help="keep N training examples (random.Random(0), file order)"
    )
    p.add_argument(
        "--max-tokens",
        type=int,
        default=62,
        help="keep the first N WordPiece pieces of a sentence (default 62: 64 positions with "
        "<s> and </s>)",
    )
    args = p.parse_args(argv)
    if args.train_limit is not None and args.train_limit < 1:
        p.error("--train-limit must be >= 1")
    if args.max_tokens < 1:
        p.error("--max-tokens must be >= 1")
    out = Path(args.out)
    try:
        if not Path(args.dict).is_file():
            raise GlueDataError(
                f"--dict {args.dict} does not exist; pass the converted checkpoint's dict.txt "
                f"(python -m fairseq_ext.convert from-transformers writes it)"
            )
        tok = load_tokenizer(args.tokenizer)
        folder = task_folder(args.local, args.task, out)
        (out / "raw").mkdir(parents=True, exist_ok=True)
        for split, name in SPLITS:
            rows = read_tsv(folder / name, LABELS[args.task])
            kept = subset(rows, args.train_limit if split == "train" else None)
            pieces, cut = encode_lines(tok, [s for s, _ in kept], args.max_tokens)
            (out / "raw" / f"{split}.input0").write_text(
                "".join(x + "\n" for x in pieces), encoding="utf-8"
            )
            (out / "raw" / f"{split}.label").write_text(
                "".join(lab + "\n" for _, lab in kept), encoding="utf-8"
            )
            counts = ", ".join(
                f"label {lab}: {sum(1 for _, x in kept if x == lab)}" for lab in LABELS[args.task]
            )
            print(
                f"glue: {folder / name}: read {len(rows)} examples, wrote {len(kept)} to "
                f"{out / 'raw'}/{split}.* "
                f"({counts}; {cut} cut to {args.max_tokens} pieces)",
                file=sys.stderr,
            )
    except (GlueDataError, WordpieceError) as e:
        print(f"glue: error: {e}", file=sys.stderr)
        sys.exit(2)
    binarize(out / "raw", out, ("input0",), args.dict)


if __name__ == "__main__":
    main()

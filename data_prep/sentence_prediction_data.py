"""Binarization shared by the data_prep scripts that build fine-tuning sets for fairseq's
``sentence_prediction`` task (headline_match.py, word_order.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def binarize(raw: Path, out: Path, fields: tuple[str, ...], srcdict: str) -> None:
    """``fairseq-preprocess --only-source`` of RAW/{train,valid}.FIELD into OUT/bin/FIELD for each
    field: the text fields with the pre-training ``srcdict``, ``label`` with its own dictionary."""
    for field in (*fields, "label"):
        dict_args = [] if field == "label" else ["--srcdict", srcdict]
        subprocess.run(
            [
                "fairseq-preprocess",
                "--only-source",
                "--trainpref",
                str(raw / f"train.{field}"),
                "--validpref",
                str(raw / f"valid.{field}"),
                "--destdir",
                str(out / "bin" / field),
                "--workers",
                "2",
                *dict_args,
            ],
            check=True,
            capture_output=True,
        )
    print(
        f"binarized in {out / 'bin'} (fairseq-train --task sentence_prediction --num-classes 2)",
        file=sys.stderr,
    )

"""Binarization shared by the data_prep scripts that build fine-tuning sets for fairseq's
``sentence_prediction`` task (headline_match.py, word_order.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from fairseq_ext.checkpoints import dictionaries


def binarize(raw: Path, out: Path, fields: tuple[str, ...], srcdict: str) -> None:
    """``fairseq-preprocess --only-source`` of RAW/{train,valid}.FIELD into OUT/bin/FIELD for each
    field: the text fields with the pre-training ``srcdict`` (checked first:
    ``fairseq_ext.checkpoints.dictionaries``), ``label`` with its own dictionary. Binarized into
    OUT/bin.partial, moved to OUT/bin when every field is done, so that the script can be run
    again after a kill (fairseq-preprocess refuses a folder that holds its dictionaries)."""
    if dictionaries.main([srcdict]):
        raise SystemExit(1)
    partial, final = out / "bin.partial", out / "bin"
    shutil.rmtree(partial, ignore_errors=True)
    for field in (*fields, "label"):
        dict_args = [] if field == "label" else ["--srcdict", srcdict]
        proc = subprocess.run(
            [
                "fairseq-preprocess",
                "--only-source",
                "--trainpref",
                str(raw / f"train.{field}"),
                "--validpref",
                str(raw / f"valid.{field}"),
                "--destdir",
                str(partial / field),
                "--workers",
                "2",
                *dict_args,
            ],
            capture_output=True,
            text=True,
        )
        if proc.returncode:
            shutil.rmtree(partial, ignore_errors=True)
            sys.stderr.write(proc.stderr[-3000:])
            raise SystemExit(f"error: fairseq-preprocess failed on the {field} field (above)")
    shutil.rmtree(final, ignore_errors=True)
    partial.rename(final)
    print(
        f"binarized in {final} (fairseq-train --task sentence_prediction --num-classes 2)",
        file=sys.stderr,
    )

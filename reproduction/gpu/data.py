"""Binarized data for ``gpu.training`` and ``gpu.throughput``, made on the fly with fairseq's own
``fairseq-preprocess`` (``python -m fairseq_cli.preprocess``) and one fixed dictionary: pairs
(``en`` -> ``de``, both sides on the one dictionary, as every pair model here shares its
embeddings) and monolingual text for the masked LM tasks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# fairseq's `transformer` at ProphetNet's base size (6+6 x 768, 12 heads, FFN 3072): the
# reference beside prophetnet_base in gpu.throughput and gpu.training
SIZE_768 = (
    "--encoder-layers",
    "6",
    "--decoder-layers",
    "6",
    "--encoder-embed-dim",
    "768",
    "--decoder-embed-dim",
    "768",
    "--encoder-ffn-embed-dim",
    "3072",
    "--decoder-ffn-embed-dim",
    "3072",
    "--encoder-attention-heads",
    "12",
    "--decoder-attention-heads",
    "12",
)
PREPROCESS = [sys.executable, "-m", "fairseq_cli.preprocess", "--workers", "4"]


def _preprocess(args: list, log: Path) -> None:
    with open(log, "w") as out:
        proc = subprocess.run([*PREPROCESS, *map(str, args)], stdout=out, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise RuntimeError(f"fairseq-preprocess failed ({proc.returncode}); see {log}")


def binarize_pairs(train: Path, valid: Path, dictionary: Path, dest: Path) -> Path:
    """``train``/``valid`` are prefixes of ``.en`` and ``.de`` files of space-separated tokens."""
    dest.mkdir(parents=True, exist_ok=True)
    _preprocess(
        [
            "-s",
            "en",
            "-t",
            "de",
            "--trainpref",
            train,
            "--validpref",
            valid,
            "--srcdict",
            dictionary,
            "--joined-dictionary",
            "--destdir",
            dest,
        ],
        dest.parent / f"{dest.name}.log",
    )
    return dest


def binarize_mono(train: Path, valid: Path, dictionary: Path, dest: Path) -> Path:
    """``train``/``valid`` are files of space-separated tokens, one sentence a line."""
    dest.mkdir(parents=True, exist_ok=True)
    _preprocess(
        [
            "--only-source",
            "--trainpref",
            train,
            "--validpref",
            valid,
            "--srcdict",
            dictionary,
            "--destdir",
            dest,
        ],
        dest.parent / f"{dest.name}.log",
    )
    return dest

"""Each model gets the input its own task binarises (issue 76): the shipped test sample encoded
with the shipped sentencepiece model, binarised by ``fairseq-preprocess`` with the shipped
dictionary, and read back by each checkpoint's own task (``load_dataset``), exactly as
``fairseq-generate`` reads it. fairseq's ``translation`` (the autoregressive teacher) gives the
source as ``pieces </s>``; ``translation_lev`` and so ``cmlm_hybrid`` (the student) prepend
``<s>``. A bench that hands both models one format handicaps one of them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

from reproduction.benchmarks.common import ROOT

MODEL_DIR = ROOT / "examples" / "quickstart" / "model"
SAMPLE = ROOT / "examples" / "quickstart" / "data"


def sentencepiece():
    """The shipped sentencepiece model."""
    import sentencepiece as spm

    return spm.SentencePieceProcessor(model_file=str(MODEL_DIR / "spm.model"))


def references(n: int, split: str = "test") -> list[str]:
    """The first ``n`` German references of the shipped test sample (``split``: another split of
    the shipped data, e.g. ``valid``)."""
    return (SAMPLE / f"{split}.de").read_text(encoding="utf-8").splitlines()[:n]


def binarise_sample(n: int, work: Path, split: str = "test") -> Path:
    """``work/bin``: the first ``n`` pairs of the shipped test sample (``split``: of another split
    of the shipped data) as the ``test`` split, encoded with the shipped sentencepiece model and
    binarised by ``fairseq-preprocess`` with the shipped dictionary (as ``data_prep``'s scripts
    do)."""
    sp = sentencepiece()
    text = work / "text"
    text.mkdir(parents=True, exist_ok=True)
    for lang in ("en", "de"):
        lines = (SAMPLE / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()[:n]
        (text / f"test.{lang}").write_text(
            "".join(" ".join(sp.encode(line, out_type=str)) + "\n" for line in lines),
            encoding="utf-8",
        )
    out = work / "bin"
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "fairseq-preprocess"),
            "-s",
            "en",
            "-t",
            "de",
            "--testpref",
            str(text / "test"),
            "--srcdict",
            str(MODEL_DIR / "dict.txt"),
            "--joined-dictionary",
            "--destdir",
            str(out),
            "--workers",
            "1",
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"fairseq-preprocess failed: {proc.stderr[-2000:]}")
    return out


def load(checkpoint: Path, data: Path, device: str = "cpu"):
    """``(model, task, sources)``: the checkpoint as ``fairseq-generate --path CHECKPOINT DATA``
    loads it (its own task, ``--user-dir`` the plugin), in float32 on the CPU, and the ``test``
    split's source token ids as that task reads them, in line order."""
    from fairseq import checkpoint_utils

    from fairseq_ext import plugin

    plugin.load()
    (model,), _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(checkpoint)], arg_overrides={"data": str(data)}
    )
    model.to(device).eval()
    if device == "cpu":
        model.float()
    task.load_dataset("test")
    dataset = task.dataset("test")
    return model, task, [dataset[i]["source"] for i in range(len(dataset))]


def batches(task, sources: list[torch.Tensor], bsz: int) -> list[dict]:
    """``sources`` in line order, ``bsz`` at a time, collated by the task's own dataset (its
    padding side and ``<s>``; each batch's ``id`` gives the lines back)."""
    dataset = task.dataset("test")
    return [
        dataset.collater([dataset[i] for i in range(start, min(start + bsz, len(sources)))])
        for start in range(0, len(sources), bsz)
    ]


def pieces(tokens: torch.Tensor, dictionary) -> list[str]:
    """The sentencepiece pieces of a hypothesis or a source, without ``<s>`` and ``</s>`` (a source
    so is what CTranslate2, which adds ``</s>`` itself, is given)."""
    return dictionary.string(tokens, extra_symbols_to_ignore={dictionary.bos()}).split()

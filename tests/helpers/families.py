"""Every task of the plugin as a tiny in-process build: the fairseq-train command line of each
(task, model, criterion), parsed by fairseq's own parser, then ``setup_task``, ``build_model``
and ``build_criterion`` exactly as ``fairseq-train`` calls them. The data folder needs only
dictionaries (``dict_folder``), so a build costs milliseconds and no CLI start."""

from __future__ import annotations

from pathlib import Path

import torch
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

from tests.conftest import TINY_DIMS, USER_DIR

ENCODER_DIMS = [
    "--encoder-layers",
    "1",
    "--encoder-embed-dim",
    "32",
    "--encoder-ffn-embed-dim",
    "64",
    "--encoder-attention-heads",
    "2",
]

# family -> the task, model and criterion options of its training command line
FAMILY_ARGV: dict[str, list[str]] = {
    "hi_cmlm": [
        "--task",
        "cmlm_hybrid",
        "-s",
        "en",
        "-t",
        "de",
        "--arch",
        "hi_cmlm_transformer_tiny",
        *TINY_DIMS,
        "--criterion",
        "nat_loss",
    ],
    "prophetnet": [
        "--task",
        "translation_prophetnet",
        "-s",
        "en",
        "-t",
        "de",
        "--arch",
        "prophetnet_tiny",
        *TINY_DIMS,
        "--max-source-positions",
        "64",
        "--max-target-positions",
        "64",
        "--criterion",
        "ngram_language_loss",
    ],
    "prophetnet_denoising": [
        "--task",
        "prophetnet_denoising",
        "--source-lang",
        "en",
        "--arch",
        "prophetnet_tiny",
        *TINY_DIMS,
        "--max-source-positions",
        "64",
        "--max-target-positions",
        "64",
        "--criterion",
        "ngram_language_loss",
    ],
    "posmask": [
        "--task",
        "position_masked_lm",
        "--arch",
        "position_masked_roberta_tiny",
        *ENCODER_DIMS,
        "--tokens-per-sample",
        "64",
        "--criterion",
        "position_masked_lm",
    ],
    "unilm": [
        "--task",
        "unilm_seq2seq",
        "-s",
        "en",
        "-t",
        "de",
        "--arch",
        "unilm_transformer_tiny",
        *ENCODER_DIMS,
        "--max-positions",
        "64",
        "--criterion",
        "cross_entropy",
    ],
    "permutation_lm": [
        "--task",
        "permutation_lm",
        "--arch",
        "unilm_transformer_tiny",
        *ENCODER_DIMS,
        "--max-positions",
        "64",
        "--tokens-per-sample",
        "64",
        "--criterion",
        "cross_entropy",
    ],
}


def dict_folder(folder: Path, words: int) -> Path:
    """A data folder with only dictionaries of ``words`` ordinary symbols (``dict.txt`` for
    monolingual tasks, ``dict.en.txt`` / ``dict.de.txt`` for pairs)."""
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join(f"w{i} {1000 - i}\n" for i in range(words))
    for name in ("dict.txt", "dict.en.txt", "dict.de.txt"):
        (folder / name).write_text(text)
    return folder


def build(folder: Path, family: str, *extra: str, seed: int = 0):
    """``(task, model, criterion)`` built from ``fairseq-train FOLDER --user-dir ... <family>
    extra``."""
    argv = [str(folder), "--user-dir", USER_DIR, *FAMILY_ARGV[family], *extra]
    args = options.parse_args_and_arch(options.get_training_parser(), argv)
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    torch.manual_seed(seed)
    model = task.build_model(cfg.model)
    return task, model, task.build_criterion(cfg.criterion)

"""ProphetNet through the real fairseq CLIs (subprocesses): span-masking pre-training on the
source side, fine-tuning from it, beam-4 generation of every test sentence; safe checkpoints;
bad input refused with one clear line."""

import argparse

import numpy as np
import pytest
import torch
from fairseq.data import Dictionary, indexed_dataset

from fairseq_ext.checkpoints import pickled_globals, safe_load
from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.tasks.prophetnet_denoising import (
    ProphetNetDenoisingConfig,
    ProphetNetDenoisingTask,
)
from fairseq_ext.tasks.translation_prophetnet import TranslationProphetNetTask
from tests.conftest import TINY_DIMS, USER_DIR, run

COMMON = [
    "--user-dir",
    USER_DIR,
    "--arch",
    "prophetnet_tiny",
    *TINY_DIMS,
    "--criterion",
    "ngram_language_loss",
    "--optimizer",
    "adam",
    "--lr",
    "5e-4",
    "--max-tokens",
    "2000",
    "--no-progress-bar",
    "--log-format",
    "simple",
    "--log-interval",
    "1",
    "--seed",
    "1",
    "--num-workers",
    "0",
]


def hypotheses(stdout: str) -> dict[int, list[str]]:
    out = {}
    for line in stdout.splitlines():
        if line.startswith("H-"):
            sid, _, text = line[2:].split("\t")
            out[int(sid)] = text.split()
    return out


@pytest.fixture(scope="module")
def article_data(tiny_data, tmp_path_factory):
    """The English (source) side alone, with the fine-tuning dictionary, for pre-training."""
    out = tmp_path_factory.mktemp("article_bin")
    raw = tiny_data.parent / "raw"
    run(
        [
            "fairseq-preprocess",
            "--only-source",
            "--source-lang",
            "en",
            "--trainpref",
            raw / "train",
            "--validpref",
            raw / "valid",
            "--srcdict",
            tiny_data / "dict.en.txt",
            "--destdir",
            out,
            "--workers",
            "1",
        ]
    )
    return out


@pytest.fixture(scope="module")
def pretrained(article_data, tmp_path_factory):
    save = tmp_path_factory.mktemp("pretrain")
    proc = run(
        [
            "fairseq-train",
            article_data,
            "--task",
            "prophetnet_denoising",
            *COMMON,
            "--max-update",
            "3",
            "--save-dir",
            save,
        ]
    )
    return save / "checkpoint_last.pt", proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def finetuned(tiny_data, pretrained, tmp_path_factory):
    save = tmp_path_factory.mktemp("finetune")
    proc = run(
        [
            "fairseq-train",
            tiny_data,
            "--task",
            "translation_prophetnet",
            "-s",
            "en",
            "-t",
            "de",
            *COMMON,
            "--label-smoothing",
            "0.1",
            "--max-update",
            "3",
            "--save-dir",
            save,
            "--finetune-from-model",
            pretrained[0],
        ]
    )
    return save / "checkpoint_last.pt", proc.stdout + proc.stderr


def test_pretraining_logs_every_stream_and_finetuning_starts_from_it(pretrained, finetuned):
    for log in (pretrained[1], finetuned[1]):
        for key in ("loss_s1", "acc_s1", "loss_s2", "acc_s2"):
            assert f"{key}=" in log or f"{key} " in log, key
        assert "nan" not in log.lower().replace("nan_", "")
    assert "loading pretrained model from" in finetuned[1]
    before = safe_load(str(pretrained[0]))["model"]
    after = safe_load(str(finetuned[0]))["model"]
    assert set(before) == set(after)
    # 3 Adam updates at lr 5e-4 move a weight by a few 1e-3; another initialisation by ~0.02
    diff = (
        (before["decoder.ngram_embeddings.weight"] - after["decoder.ngram_embeddings.weight"])
        .abs()
        .max()
    )
    assert 0 < float(diff) < 5e-3


def test_checkpoints_pickle_only_argparse_namespace(pretrained, finetuned):
    for ckpt in (pretrained[0], finetuned[0]):
        assert pickled_globals(str(ckpt)) == ["argparse.Namespace"]


def test_generate_beam4_every_sentence_with_length_and_repeat_limits(tiny_data, finetuned):
    proc = run(
        [
            "fairseq-generate",
            tiny_data,
            "--user-dir",
            USER_DIR,
            "--task",
            "translation_prophetnet",
            "-s",
            "en",
            "-t",
            "de",
            "--path",
            finetuned[0],
            "--gen-subset",
            "test",
            "--batch-size",
            "8",
            "--beam",
            "4",
            "--lenpen",
            "1.0",
            "--no-repeat-ngram-size",
            "2",
            "--min-len",
            "3",
            "--max-len-a",
            "0",
            "--max-len-b",
            "6",
        ]
    )
    hypos = hypotheses(proc.stdout)
    assert sorted(hypos) == list(range(21))  # 21 is not a multiple of 8: no batch is dropped
    for tokens in hypos.values():
        assert 3 <= len(tokens) <= 6
        bigrams = list(zip(tokens, tokens[1:]))
        assert len(bigrams) == len(set(bigrams))


def test_bad_ngram_is_one_line_error(tiny_data, tmp_path):
    proc = run(
        [
            "fairseq-train",
            tiny_data,
            "--task",
            "translation_prophetnet",
            "-s",
            "en",
            "-t",
            "de",
            *COMMON,
            "--ngram",
            "0",
            "--max-update",
            "1",
            "--save-dir",
            tmp_path,
        ],
        check=False,
    )
    assert proc.returncode != 0
    assert "fairseq_ext: error: --ngram must be >= 1" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_finetuning_with_another_ngram_names_the_option(tiny_data, pretrained, tmp_path):
    """Pre-trained with --ngram 2, fine-tuned with --ngram 3: fairseq's "please ensure that
    the architectures match" becomes one line naming --ngram; nothing is saved."""
    save = tmp_path / "ckpt"
    proc = run(
        [
            "fairseq-train",
            tiny_data,
            "--task",
            "translation_prophetnet",
            "-s",
            "en",
            "-t",
            "de",
            *COMMON,
            "--ngram",
            "3",
            "--max-update",
            "1",
            "--save-dir",
            save,
            "--finetune-from-model",
            pretrained[0],
        ],
        check=False,
    )
    assert proc.returncode != 0
    assert "fairseq_ext: error: --ngram differs from the checkpoint's" in proc.stderr
    assert "use the --ngram the checkpoint was trained with" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not save.exists() or not any(save.iterdir())


def write_binarized(prefix, lines, dictionary):
    builder = indexed_dataset.make_builder(f"{prefix}.bin", impl="mmap", vocab_size=len(dictionary))
    for ids in lines:
        builder.add_item(torch.IntTensor(ids + [dictionary.eos()]))
    builder.finalize(f"{prefix}.idx")


def test_target_of_length_one_is_refused(tiny_data, tmp_path):
    d = Dictionary.load(str(tiny_data / "dict.en.txt"))
    for lang in ("en", "de"):
        (tmp_path / f"dict.{lang}.txt").write_text((tiny_data / f"dict.{lang}.txt").read_text())
    write_binarized(tmp_path / "train.en-de.en", [[10, 11], [12, 13], [14]], d)
    write_binarized(tmp_path / "train.en-de.de", [[10], [11, 12], []], d)  # line 3: only </s>
    proc = run(
        [
            "fairseq-train",
            tmp_path,
            "--task",
            "translation_prophetnet",
            "-s",
            "en",
            "-t",
            "de",
            *COMMON,
            "--max-update",
            "1",
            "--save-dir",
            tmp_path / "ckpt",
            "--disable-validation",
        ],
        check=False,
    )
    assert proc.returncode != 0
    assert "fairseq_ext: error: train target line 3 is empty: it has only </s>" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_empty_article_is_refused_and_empty_input_line_skipped(tiny_data, tmp_path, capsys):
    d = Dictionary.load(str(tiny_data / "dict.en.txt"))
    (tmp_path / "dict.article.txt").write_text((tiny_data / "dict.en.txt").read_text())
    write_binarized(tmp_path / "train.article-None.article", [[10, 11], [], [12]], d)
    cfg = ProphetNetDenoisingConfig(
        data=str(tmp_path), seed=1, dataset_impl=None, train_subset="train"
    )
    task = ProphetNetDenoisingTask.setup_task(cfg)
    assert task.source_dictionary[task.mask_idx] == "<mask>" and task.mask_idx == len(d)
    with pytest.raises(FairseqExtError, match="train text line 2 is empty"):
        task.load_dataset("train")

    def translation_task():
        return TranslationProphetNetTask.setup_task(
            argparse.Namespace(
                data=str(tiny_data), source_lang="en", target_lang="de", max_source_positions=4
            )
        )

    task = translation_task()
    task.build_dataset_for_inference([torch.tensor([10, 2]), torch.tensor([11, 2])], [2, 2])
    dataset = task.build_dataset_for_inference([torch.tensor([10, 2]), torch.tensor([2])], [2, 1])
    assert (
        "fairseq_ext: input line 4 is empty" in capsys.readouterr().err
    )  # lines count across buffers
    assert list(dataset.ordered_indices()) == [0]
    with pytest.raises(
        FairseqExtError, match="input line 1 has 5 tokens, more than --max-source-positions 4"
    ):
        translation_task().build_dataset_for_inference([torch.tensor([10, 11, 12, 13, 2])], [5])
    with pytest.raises(FairseqExtError, match="right-padded targets"):
        TranslationProphetNetTask.setup_task(
            argparse.Namespace(data=str(tiny_data), left_pad_target=True)
        )


def test_long_article_is_refused_not_truncated(tiny_data, tmp_path):
    d = Dictionary.load(str(tiny_data / "dict.en.txt"))
    (tmp_path / "dict.article.txt").write_text((tiny_data / "dict.en.txt").read_text())
    write_binarized(
        tmp_path / "valid.article-None.article", [list(range(10, 20)), list(range(10, 40))], d
    )
    cfg = ProphetNetDenoisingConfig(
        data=str(tmp_path), seed=1, dataset_impl=None, train_subset="train", max_source_positions=16
    )
    with pytest.raises(FairseqExtError, match="valid text line 2 has 31 tokens, more than"):
        ProphetNetDenoisingTask.setup_task(cfg).load_dataset("valid")
    assert np.array_equal(
        indexed_dataset.make_dataset(str(tmp_path / "valid.article-None.article"), "mmap").sizes,
        [11, 31],
    )

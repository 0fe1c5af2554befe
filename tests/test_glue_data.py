"""data_prep/glue.py (GLUE CoLA / SST-2 TSV files -> WordPiece -> fairseq's sentence_prediction
layout) and the fine-tuning it feeds, from a tiny converted BERT, with and without the enhanced
dropout gradient (Wagner et al. 2020, section 2.2: the attention dropout mask is applied in the
forward pass only)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import ROOT, USER_DIR, run, script_env, shared_data, write_lines

SCRIPT = ROOT / "data_prep" / "glue.py"
WORDS = [
    "the",
    "film",
    "is",
    "good",
    "bad",
    "a",
    "cat",
    "sat",
    "on",
    "mat",
    "dog",
    "ran",
    "very",
    ",",
    ".",
]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, "##s"]

_spec = importlib.util.spec_from_file_location("glue_data_prep", SCRIPT)
glue = importlib.util.module_from_spec(_spec)
sys.modules["glue_data_prep"] = glue  # dataclasses look their module up
sys.path.insert(0, str(ROOT / "data_prep"))  # the script imports its neighbours
try:
    _spec.loader.exec_module(glue)
finally:
    sys.path.remove(str(ROOT / "data_prep"))


@pytest.fixture
def tokenizer(tmp_path) -> Path:
    folder = tmp_path / "tok"
    folder.mkdir()
    write_lines(folder / "vocab.txt", VOCAB)
    write_lines(tmp_path / "dict.txt", [f"{t} 1" for t in VOCAB])
    return folder


def prep(tmp_path, tokenizer, task, local, *extra):
    """data_prep/glue.py in a process of its own; the two fairseq-preprocess it calls are forked."""
    return subprocess.run(
        [
            sys.executable,
            SCRIPT,
            "--task",
            task,
            "--local",
            local,
            "--tokenizer",
            tokenizer,
            "--dict",
            tmp_path / "dict.txt",
            "--out",
            tmp_path / "out",
            *map(str, extra),
        ],
        capture_output=True,
        text=True,
        env=script_env(),
    )


SST2_TRAIN = [
    "label\tcontent",
    "1\tthe film is good",
    "0\tthe film is bad",
    "1\ta very good film",
    "0\tbad , bad film",
    "1\tgood dogs .",
]
COLA_TRAIN = [
    "the cat sat on the mat\t1",
    "sat the on cat mat\t0",
    "the dog ran\t1",
    "ran dog the the\t0",
]


def test_both_layouts_labels_pieces_and_counts(tmp_path, tokenizer):
    sst, cola = tmp_path / "SST-2", tmp_path / "CoLA"
    for folder, train, dev in (
        (sst, SST2_TRAIN, ["label\tcontent", "0\tthe film is bad .", "1\tgood"]),
        (cola, COLA_TRAIN, ["the dog sat\t1", "dog the sat\t0"]),
    ):
        folder.mkdir()
        write_lines(folder / "train.tsv", train)
        write_lines(folder / "dev.tsv", dev)
    proc = prep(
        tmp_path, tokenizer, "SST-2", tmp_path
    )  # the parent folder: --local DIR/TASK is found
    assert proc.returncode == 0, proc.stderr
    raw = tmp_path / "out" / "raw"
    assert (raw / "train.label").read_text().split() == ["1", "0", "1", "0", "1"]
    assert (raw / "train.input0").read_text().splitlines()[-1] == "good dog ##s ."
    assert (raw / "valid.input0").read_text().splitlines() == ["the film is bad .", "good"]
    assert "read 5 examples, wrote 5" in proc.stderr and "label 0: 2, label 1: 3" in proc.stderr
    # the binarized labels, read back through fairseq's label dictionary, are the TSV's labels
    from fairseq.data import Dictionary, data_utils

    labels = Dictionary.load(str(tmp_path / "out" / "bin" / "label" / "dict.txt"))
    dataset = data_utils.load_indexed_dataset(
        str(tmp_path / "out" / "bin" / "label" / "train"), labels
    )
    assert [labels.string(dataset[i][:1]) for i in range(len(dataset))] == ["1", "0", "1", "0", "1"]

    rows = glue.read_tsv(cola / "train.tsv", ("0", "1"))
    assert rows == [(s.split("\t")[0], s.split("\t")[1]) for s in COLA_TRAIN]
    write_lines(tmp_path / "glue4.tsv", ["gj04\t1\t\tthe cat sat", "gj04\t0\t*\tcat the sat"])
    assert glue.read_tsv(tmp_path / "glue4.tsv", ("0", "1")) == [
        ("the cat sat", "1"),
        ("cat the sat", "0"),
    ]
    write_lines(tmp_path / "glue_sst.tsv", ["sentence\tlabel", "a good film\t1"])
    assert glue.read_tsv(tmp_path / "glue_sst.tsv", ("0", "1")) == [("a good film", "1")]


def test_train_limit_is_a_fixed_subset_in_file_order(tmp_path, tokenizer):
    rows = [(f"s{i}", str(i % 2)) for i in range(50)]
    a, b = glue.subset(rows, 7), glue.subset(rows, 7)
    assert a == b and len(a) == 7 and a == sorted(a, key=rows.index)
    assert glue.subset(rows, None) == rows and glue.subset(rows, 80) == rows


@pytest.mark.parametrize(
    "row, problem",
    [
        ("the film is good", "has no label"),
        ("the film is good\t", "has no label"),
        ("the film is good\t2", "label '2' is not one of the task's labels"),
        ("\t1", "the sentence is empty"),
    ],
)
def test_bad_rows_get_one_line_naming_file_and_line(tmp_path, tokenizer, row, problem):
    cola = tmp_path / "CoLA"
    cola.mkdir()
    write_lines(cola / "train.tsv", COLA_TRAIN[:2] + [row] + COLA_TRAIN[2:])
    write_lines(cola / "dev.tsv", COLA_TRAIN)
    proc = prep(tmp_path, tokenizer, "CoLA", cola)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert lines[0].startswith(f"glue: error: {cola / 'train.tsv'}:3: ") and problem in lines[0]


def test_the_shipped_files_are_read_whole():
    folder = shared_data("glue")
    assert len(glue.read_tsv(folder / "CoLA" / "dev.tsv", ("0", "1"))) == 516
    assert len(glue.read_tsv(folder / "SST-2" / "dev.tsv", ("0", "1"))) == 872


# ---- fine-tuning a tiny converted BERT on it, with and without the straight-through flag
# ------------


@pytest.fixture(scope="module")
def glue_finetuned(tmp_path_factory):
    """A tiny random BERT saved by transformers, converted, fine-tuned for 2 updates on a tiny
    CoLA-layout set with ordinary and with straight-through attention dropout."""
    transformers = pytest.importorskip("transformers")
    tmp = tmp_path_factory.mktemp("glue_ft")
    bert = tmp / "bert"
    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
    )
    transformers.BertModel(cfg).save_pretrained(bert)
    write_lines(bert / "vocab.txt", VOCAB)
    run([sys.executable, "-m", "fairseq_ext.convert", "from-transformers", bert, tmp / "converted"])
    (tmp / "CoLA").mkdir()
    write_lines(tmp / "CoLA" / "train.tsv", COLA_TRAIN * 4)
    write_lines(tmp / "CoLA" / "dev.tsv", COLA_TRAIN)
    run(
        [
            sys.executable,
            SCRIPT,
            "--task",
            "CoLA",
            "--local",
            tmp / "CoLA",
            "--tokenizer",
            bert,
            "--dict",
            tmp / "converted" / "dict.txt",
            "--out",
            tmp / "data",
        ]
    )
    options = (tmp / "converted" / "options.txt").read_text().split()
    logs = {}
    for st in (False, True):
        save = tmp / f"ft{int(st)}"
        proc = run(
            [
                "fairseq-train",
                tmp / "data" / "bin",
                "--user-dir",
                USER_DIR,
                "--task",
                "sentence_prediction",
                "--num-classes",
                "2",
                "--init-token",
                "0",
                "--separator-token",
                "2",
                "--arch",
                "position_masked_roberta",
                *options,
                *(["--attention-dropout-straight-through"] if st else []),
                "--criterion",
                "sentence_prediction",
                "--report-mcc",
                "--restore-file",
                tmp / "converted" / "model.pt",
                "--reset-optimizer",
                "--reset-dataloader",
                "--reset-meters",
                "--optimizer",
                "adam",
                "--lr",
                "1e-4",
                "--batch-size",
                "4",
                "--required-batch-size-multiple",
                "1",
                "--max-update",
                "2",
                "--log-format",
                "simple",
                "--log-interval",
                "1",
                "--no-progress-bar",
                "--num-workers",
                "0",
                "--no-epoch-checkpoints",
                "--no-save-optimizer-state",
                "--save-dir",
                save,
            ]
        )
        logs[st] = proc.stdout + proc.stderr
    return tmp, logs


def test_sentence_prediction_fine_tunes_a_converted_bert_with_either_dropout(glue_finetuned):
    _, logs = glue_finetuned
    for st, log in logs.items():
        assert re.search(r"\| valid \|.*\| accuracy [\d.]+ .*\| mcc [-\d.]+", log)
        assert (
            "1 attention modules drop their weights with the straight-through gradient" in log
        ) == st


def test_straight_through_forward_is_identical_and_gradients_differ_where_dropped(glue_finetuned):
    """Same weights, same random draws: the logits are identical; at the attention dropout
    the ordinary gradient is ``g * m / (1 - p)`` (zero where the mask m dropped a weight),
    the straight-through one is ``g``: they differ exactly where m = 0 (beyond the 1/(1-p)
    scale that ordinary dropout applies to the kept weights)."""
    from fairseq import checkpoint_utils
    from fairseq.modules import MultiheadAttention

    tmp, _ = glue_finetuned
    p = 0.5
    results = {}
    for st in (False, True):
        (model,), _, task = checkpoint_utils.load_model_ensemble_and_task(
            [str(tmp / "ft0" / "checkpoint_last.pt")],
            arg_overrides={
                "data": str(tmp / "data" / "bin"),
                "attention_dropout": p,
                "dropout": 0.0,
                "attention_dropout_straight_through": st,
            },
        )
        attention = [m for m in model.modules() if isinstance(m, MultiheadAttention)]
        assert len(attention) == 1
        attention[0].skip_embed_dim_check = True  # both through fairseq's Python attention path
        task.load_dataset("valid")
        batch = task.dataset("valid").collater([task.dataset("valid")[i] for i in range(4)])
        seen = {}
        dropout = attention[0].dropout_module
        dropout.register_forward_hook(lambda m, i, o: seen.update(x=i[0], y=o))
        dropout.register_full_backward_hook(lambda m, gi, go: seen.update(gx=gi[0], gy=go[0]))
        model.train()
        torch.manual_seed(7)
        logits = model(
            **batch["net_input"],
            features_only=True,
            classification_head_name="sentence_classification_head",
        )[0]
        logits.sum().backward()
        results[st] = (
            logits.detach(),
            seen,
            model.encoder.sentence_encoder.embed_tokens.weight.grad.clone(),
        )
    (lo, so, eo), (ls, ss, es) = results[False], results[True]
    assert torch.equal(lo, ls) and torch.equal(so["y"], ss["y"])
    live = so["x"] > 0  # attention weights that exist (padding keys have weight 0)
    dropped = live & so["y"].eq(0)
    kept = live & so["y"].ne(0)
    assert dropped.any() and kept.any()
    assert torch.equal(
        so["gy"], ss["gy"]
    )  # one layer: the gradient reaching the dropout is the same
    assert torch.allclose(ss["gx"], ss["gy"])  # straight-through: passed as it is
    assert (
        torch.allclose(so["gx"][kept], so["gy"][kept] / (1 - p)) and so["gx"][dropped].eq(0).all()
    )
    assert ss["gx"][dropped].ne(0).any()
    assert not torch.allclose(eo, es)  # and so the parameters get different gradients

"""UniLM and the permutation LM through the real fairseq CLIs (subprocesses): a tiny RoBERTa
trained by fairseq-train becomes a seq2seq model (--init-from) with a pruned vocabulary
(--keep-tokens); fairseq-generate decodes every sentence with beam search and prints the
pruned dictionary's words; permutation_lm trains and fairseq-validate reports natural-order
perplexity; bad input gets one clear line."""

import math
import re
import sys

import pytest
from fairseq.data import Dictionary

from fairseq_ext.checkpoints import pickled_globals
from tests.conftest import ROOT, USER_DIR, binarize, read_sample, run

TINY = [
    "--encoder-layers",
    "1",
    "--encoder-embed-dim",
    "32",
    "--encoder-ffn-embed-dim",
    "64",
    "--encoder-attention-heads",
    "2",
    "--max-positions",
    "256",
]
COMMON = [
    "--optimizer",
    "adam",
    "--lr",
    "5e-4",
    "--max-tokens",
    "2000",
    "--no-progress-bar",
    "--log-format",
    "simple",
    "--seed",
    "1",
    "--num-workers",
    "0",
    "--no-epoch-checkpoints",
]


@pytest.fixture(scope="session")
def text_data(tmp_path_factory, tiny_data):
    """The English and German training text of tiny_data, binarized with its dictionary for
    fairseq's masked_lm (and permutation_lm)."""
    out = tmp_path_factory.mktemp("mono")
    raw = tiny_data.parent / "raw"
    (out / "train.txt").write_text((raw / "train.en").read_text() + (raw / "train.de").read_text())
    run(
        [
            "fairseq-preprocess",
            "--only-source",
            "--trainpref",
            out / "train.txt",
            "--validpref",
            raw / "valid.en",
            "--srcdict",
            tiny_data / "dict.en.txt",
            "--destdir",
            out / "bin",
            "--workers",
            "1",
        ]
    )
    return out / "bin"


@pytest.fixture(scope="session")
def roberta_checkpoint(tmp_path_factory, text_data):
    save = tmp_path_factory.mktemp("roberta")
    # --sample-break-mode eos crashes in fairseq's TokenBlockDataset under numpy 2 (np.compat)
    run(
        [
            "fairseq-train",
            text_data,
            "--task",
            "masked_lm",
            "--arch",
            "roberta",
            "--criterion",
            "masked_lm",
            *TINY,
            "--tokens-per-sample",
            "256",
            "--sample-break-mode",
            "complete",
            "--max-update",
            "3",
            "--disable-validation",
            "--save-dir",
            save,
            *COMMON,
        ]
    )
    return save / "checkpoint_last.pt"


@pytest.fixture(scope="session")
def keep_list(tmp_path_factory, tiny_data):
    out = tmp_path_factory.mktemp("keep") / "keep.txt"
    raw = tiny_data.parent / "raw"
    proc = run(
        [
            sys.executable,
            ROOT / "data_prep" / "keep_tokens.py",
            "--dict",
            tiny_data / "dict.en.txt",
            "--min-count",
            "20",
            "--out",
            out,
            raw / "train.en",
            raw / "train.de",
        ]
    )
    assert re.search(r"kept \d+ of \d+ tokens", proc.stdout)
    return out


@pytest.fixture(scope="session")
def unilm_checkpoint(tmp_path_factory, tiny_data, roberta_checkpoint, keep_list):
    save = tmp_path_factory.mktemp("unilm")
    proc = run(
        [
            "fairseq-train",
            tiny_data,
            "--user-dir",
            USER_DIR,
            "--task",
            "unilm_seq2seq",
            "-s",
            "en",
            "-t",
            "de",
            "--arch",
            "unilm_transformer_tiny",
            "--attention-mask",
            "prefix",
            *TINY,
            "--init-from",
            roberta_checkpoint,
            "--keep-tokens",
            keep_list,
            "--criterion",
            "label_smoothed_cross_entropy",
            "--label-smoothing",
            "0.1",
            "--max-update",
            "4",
            "--save-dir",
            save,
            *COMMON,
        ]
    )
    log = proc.stdout + proc.stderr
    assert "initialised unilm_transformer from" in log and "keeping" in log
    assert (
        "ignored 1 checkpoint parameters the model does not use: encoder.sentence_encoder.version"
        in log
    )
    return save / "checkpoint_last.pt"


def _lines(stdout: str, prefix: str) -> dict[int, str]:
    out = {}
    for line in stdout.splitlines():
        if line.startswith(prefix):
            sid, *fields = line[len(prefix) :].split("\t")
            out[int(sid)] = fields[-1]
    return out


def test_generate_decodes_every_sentence_with_the_pruned_dictionary(
    tiny_data, unilm_checkpoint, keep_list
):
    args = [
        "fairseq-generate",
        tiny_data,
        "--user-dir",
        USER_DIR,
        "--task",
        "unilm_seq2seq",
        "-s",
        "en",
        "-t",
        "de",
        "--path",
        unilm_checkpoint,
        "--beam",
        "4",
        "--max-len-b",
        "8",
        "--batch-size",
        "8",
    ]
    proc = run([*args, "--keep-tokens", keep_list])
    hyps, sources = _lines(proc.stdout, "H-"), _lines(proc.stdout, "S-")
    assert sorted(hyps) == list(range(21))  # 21 is not a multiple of 8: no sentence is dropped
    kept = set(Dictionary.load(str(keep_list)).symbols) | {"<unk>"}
    assert all(set(h.split()) <= kept for h in hyps.values())
    # the source is printed through the pruned dictionary: kept pieces as they are, others <unk>
    raw = (tiny_data.parent / "raw" / "test.en").read_text().splitlines()
    for i, line in sources.items():
        expected = [p if p in kept else "<unk>" for p in raw[i].split()]
        assert line.split() == expected
    # the model's options are a dataclass config, saved as plain values: nothing but tensors is
    # pickled
    assert pickled_globals(str(unilm_checkpoint)) == []
    # the same checkpoint without --keep-tokens: one clear line
    bad = run(args, check=False)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    error = [line for line in bad.stderr.splitlines() if line.startswith("fairseq_ext: error:")]
    assert len(error) == 1 and "--keep-tokens" in error[0], bad.stderr[-2000:]


def test_permutation_lm_trains_and_reports_natural_order_perplexity(
    tmp_path, text_data, roberta_checkpoint
):
    run(
        [
            "fairseq-train",
            text_data,
            "--user-dir",
            USER_DIR,
            "--task",
            "permutation_lm",
            "--arch",
            "unilm_transformer_tiny",
            "--attention-mask",
            "permutation",
            *TINY,
            "--init-from",
            roberta_checkpoint,
            "--criterion",
            "cross_entropy",
            "--max-update",
            "4",
            "--save-dir",
            tmp_path,
            *COMMON,
        ]
    )
    proc = run(
        [
            "fairseq-validate",
            text_data,
            "--user-dir",
            USER_DIR,
            "--task",
            "permutation_lm",
            "--path",
            tmp_path / "checkpoint_last.pt",
            "--max-tokens",
            "4000",
        ]
    )
    m = re.search(
        r"valid on 'valid' subset \| loss ([\d.]+) \| ppl ([\d.]+) .*\| bsz (\d+)",
        proc.stdout + proc.stderr,
    )
    assert m, proc.stderr[-2000:]
    loss, ppl, sentences = float(m.group(1)), float(m.group(2)), int(m.group(3))
    assert sentences == 37  # every validation line
    assert ppl == pytest.approx(2**loss, rel=1e-2)
    vocab = len(Dictionary.load(str(text_data / "dict.txt"))) + 1
    assert 1 < ppl < 2 * vocab and math.isfinite(ppl)


def _seq2seq_train(data, save, *extra):
    return [
        "fairseq-train",
        data,
        "--user-dir",
        USER_DIR,
        "--task",
        "unilm_seq2seq",
        "-s",
        "en",
        "-t",
        "de",
        "--arch",
        "unilm_transformer_tiny",
        *TINY,
        "--criterion",
        "cross_entropy",
        "--max-update",
        "1",
        "--save-dir",
        save,
        *COMMON,
        *extra,
    ]


@pytest.mark.parametrize("batching", [[], ["--unsorted-batches"]])
def test_source_that_fills_the_positions_table_is_refused(tiny_data, tmp_path, batching):
    proc = run(_seq2seq_train(tiny_data, tmp_path, "--max-positions", "40", *batching), check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert re.search(
        r"fairseq_ext: error: \w+ source line \d+ has \d+ tokens with </s>; with <s> that is "
        r"\d+ of the model's 40 positions .* leaving none for the target",
        proc.stderr,
    )


def test_empty_target_and_bad_options_are_refused(spm_model, tiny_data, tmp_path):
    en, de = read_sample("train", "en", 6), read_sample("train", "de", 6)
    de[3] = ""
    data = binarize(
        spm_model,
        tmp_path,
        {"train": (en, de), "valid": (en, de)},
        srcdict=tiny_data / "dict.en.txt",
    )
    proc = run(_seq2seq_train(data, tmp_path / "ckpt"), check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "fairseq_ext: error: valid target line 4 is empty" in proc.stderr
    proc = run(
        _seq2seq_train(tiny_data, tmp_path / "ckpt", "--attention-mask", "permutation"), check=False
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert (
        "fairseq_ext: error: --attention-mask permutation is for --task permutation_lm"
        in proc.stderr
    )
    # a name no mask is registered under: the registry's names, when the model is built (no argparse
    # choices)
    proc = run(
        _seq2seq_train(tiny_data, tmp_path / "ckpt", "--attention-mask", "prefx"), check=False
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert (
        "fairseq_ext: error: --attention-mask 'prefx' is unknown; choose one of prefix, causal, "
        "permutation" in proc.stderr.splitlines()
    )


def test_permutation_lm_refuses_too_long_lines(text_data, tmp_path):
    proc = run(
        [
            "fairseq-train",
            text_data,
            "--user-dir",
            USER_DIR,
            "--task",
            "permutation_lm",
            "--arch",
            "unilm_transformer_tiny",
            *TINY,
            "--tokens-per-sample",
            "16",
            "--criterion",
            "cross_entropy",
            "--max-update",
            "1",
            "--save-dir",
            tmp_path,
            *COMMON,
        ],
        check=False,
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert re.search(
        r"fairseq_ext: error: valid line \d+ has \d+ tokens with </s>, more than "
        r"--tokens-per-sample 16 minus <s>",
        proc.stderr,
    )

"""A tokenizer checked against the dictionary, where the plugin tokenises, with the shipped
quickstart model (``examples/quickstart/model``, a 6000-piece dictionary) and the issue's wrong
model, a 300-piece sentencepiece model of the same text: ``fairseq-interactive --bpe
sentencepiece`` refuses it, and a file that is no sentencepiece model, with one line (before:
garbage translations and exit 0, or sentencepiece's ``RuntimeError``); the hub refuses both, and
raw text when the folder has no tokenizer (before: ``'▁Ein T - T - T ...'``); the data scripts
that encode with a model and a dictionary refuse the wrong model before they write anything;
``fairseq-generate`` names a split encoded with it (binarized with the model's dictionary:
BLEU 0 without a word before); a dictionary only partly covered (joined from two models) is
warned about."""

import hashlib
import os
import re
import sys

import pytest

from fairseq_ext import hub
from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.common.tokenizer_check import check_coverage
from tests.conftest import ROOT, USER_DIR, binarize, generate_args, read_sample, run, write_lines

MODEL = ROOT / "examples" / "quickstart" / "model"
SENTENCE = "A man is riding a bike."
WRONG = (
    "the sentencepiece model {model} (300 pieces) has only {covered} of the 5997 symbols of "
    "{dictionary} ({share}%): it is not the model whose pieces the dictionary holds, so text "
    "encoded with it reaches the model as pieces it was not trained on (and <unk>); give the "
    "sentencepiece model that encoded the training data, e.g. the spm.model beside the checkpoint"
)
NOT_A_MODEL = (
    "{option} {path} is not a sentencepiece model (sentencepiece cannot read it: INTERNAL: could "
    "not parse ModelProto from {path}); give the .model file that spm_train (data_prep/spm.py "
    "train) wrote and that encoded the training data, e.g. the spm.model beside the checkpoint"
)


@pytest.fixture(scope="module")
def wrong_model(tmp_path_factory):
    """A 300-piece sentencepiece model of the quickstart's training text: not the model's own."""
    folder = tmp_path_factory.mktemp("wrong_spm")
    for lang in ("en", "de"):
        write_lines(folder / f"train.{lang}", read_sample("train", lang, 2000))
    run(
        [
            sys.executable,
            ROOT / "data_prep" / "spm.py",
            "train",
            "--model",
            folder / "spm",
            "--vocab-size",
            "300",
            folder / "train.en",
            folder / "train.de",
        ]
    )
    return folder / "spm.model"


@pytest.fixture(scope="module")
def not_a_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("not_spm") / "spm.model"
    path.write_bytes(b"not a sentencepiece model\n" * 20)
    return path


def _interactive(sentencepiece_model):
    return run(
        [
            "fairseq-interactive",
            MODEL,
            "--user-dir",
            USER_DIR,
            "--task",
            "cmlm_hybrid",
            "-s",
            "en",
            "-t",
            "de",
            "--path",
            MODEL / "checkpoint.pt",
            "--bpe",
            "sentencepiece",
            "--sentencepiece-model",
            sentencepiece_model,
        ],
        input=SENTENCE + "\n",
        check=False,
    )


def _refused(proc, message):
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert [line for line in proc.stderr.splitlines() if line.startswith("fairseq_ext:")] == [
        f"fairseq_ext: error: {message}"
    ]
    assert "Traceback" not in proc.stderr and "H-" not in proc.stdout


def test_interactive_refuses_a_sentencepiece_model_that_is_not_the_dictionarys(
    wrong_model, not_a_model
):
    right = _interactive(MODEL / "spm.model")
    assert right.returncode == 0 and "D-0\t" in right.stdout and "fairseq_ext:" not in right.stderr
    proc = _interactive(wrong_model)
    covered = (
        next(line for line in proc.stderr.splitlines() if "has only" in line)
        .split("has only ")[1]
        .split()[0]
    )
    _refused(
        proc,
        WRONG.format(
            model=wrong_model,
            covered=covered,
            dictionary=f"the source dictionary in {MODEL}",
            share=round(100 * int(covered) / 5997),
        ),
    )
    assert int(covered) < 0.1 * 5997
    _refused(
        _interactive(not_a_model),
        NOT_A_MODEL.format(option="--sentencepiece-model", path=not_a_model),
    )


def test_hub_refuses_another_tokenizer_and_raw_text_without_one(wrong_model, not_a_model, tmp_path):
    """A folder without spm.model (the checkpoint and dictionaries only) takes pieces."""
    folder = tmp_path / "no_tokenizer"
    folder.mkdir()
    for name in ("checkpoint.pt", "dict.txt", "dict.en.txt", "dict.de.txt"):
        os.symlink(MODEL / name, folder / name)
    model = hub.from_pretrained(folder)
    with pytest.raises(FairseqExtError) as raised:
        model.translate(["\u2581A \u2581man", SENTENCE])
    assert str(raised.value) == (
        f"translate: sentences[1] is raw text ({SENTENCE!r}), but this model was loaded without a "
        "tokenizer (no spm.model in its folder), so it takes sentencepiece pieces (e.g. '\u2581A "
        "\u2581man ...'): put the sentencepiece model that encoded its training data in the folder "
        "as spm.model, or give from_pretrained(..., bpe='sentencepiece', "
        "sentencepiece_model=PATH), or pass the input as pieces"
    )
    pieces = " ".join(hub.from_pretrained(MODEL).bpe.encode(SENTENCE).split())
    assert model.translate(pieces).startswith("\u2581Ein \u2581Mann")
    with pytest.raises(
        FairseqExtError, match="^the sentencepiece model .* has only .* it is not the model whose"
    ):
        hub.from_pretrained(folder, bpe="sentencepiece", sentencepiece_model=str(wrong_model))
    with pytest.raises(FairseqExtError) as raised:
        hub.from_pretrained(folder, bpe="sentencepiece", sentencepiece_model=str(not_a_model))
    assert str(raised.value) == NOT_A_MODEL.format(option="sentencepiece_model", path=not_a_model)


def test_data_scripts_refuse_another_sentencepiece_model_before_writing(wrong_model, tmp_path):
    """data_prep/word_order.py and headline_match.py encode with --spm and binarize with --dict;
    the shell scripts' spm_and_binarize (here multi30k.sh) with SPM_MODEL and SRCDICT."""
    raw = tmp_path / "raw"
    raw.mkdir()
    for split in ("train", "valid"):
        write_lines(
            raw / f"{split}.txt", [s.rstrip(".") + " ." for s in read_sample(split, "en", 50)]
        )
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in raw.iterdir()}
    for script, data in (
        ("word_order.py", ["--raw", raw]),
        ("headline_match.py", ["--gigaword", raw]),
    ):
        out = tmp_path / script
        proc = run(
            [
                sys.executable,
                ROOT / "data_prep" / script,
                *data,
                "--spm",
                wrong_model,
                "--dict",
                MODEL / "dict.txt",
                "--out",
                out,
            ],
            check=False,
        )
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
        assert proc.stderr.splitlines()[-1].startswith(
            f"{script}: error: the sentencepiece model {wrong_model} (300 pieces) has only "
        )
        assert f"symbols of --dict {MODEL / 'dict.txt'}" in proc.stderr
        assert not out.exists()
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in raw.iterdir()} == before
    for split, name in (
        ("train", "train"),
        ("valid", "val"),
    ):  # multi30k.sh --local takes the dataset's names
        for lang in ("en", "de"):
            write_lines(raw / f"{name}.{lang}", read_sample(split, lang, 50))
    out = tmp_path / "multi30k"
    proc = run(
        [
            "bash",
            ROOT / "data_prep" / "multi30k.sh",
            "--local",
            raw,
            "--out",
            out,
            "--vocab",
            "6000",
        ],
        extra_env={"SPM_MODEL": str(wrong_model), "SRCDICT": str(MODEL / "dict.txt")},
        check=False,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines()[-1].startswith(
        f"data_prep/common.sh: error: the sentencepiece model {wrong_model} (300 pieces) has only "
    )
    assert f"symbols of SRCDICT {MODEL / 'dict.txt'} (" in proc.stderr
    assert not (out / "bin").exists() and not any(
        (out / "spm").iterdir()
    )  # nothing encoded or binarized


def test_generate_names_a_split_encoded_with_another_model(wrong_model, tmp_path):
    src, ref = read_sample("test", "en", 40), read_sample("test", "de", 40)
    for model, noted in ((MODEL / "spm.model", False), (wrong_model, True)):
        data = binarize(
            model, tmp_path / model.parent.name, {"test": (src, ref)}, srcdict=MODEL / "dict.txt"
        )
        proc = run(
            generate_args(data, MODEL / "checkpoint.pt", "--iter-decode-max-iter", "1")
        )  # the note, not the decoding
        notes = [line for line in proc.stderr.splitlines() if line.startswith("fairseq_ext:")]
        assert len(notes) == (2 if noted else 0), notes
        for side, line in zip(("source", "target"), notes):
            assert re.fullmatch(
                rf"fairseq_ext: \d+\.\d% of the {side} tokens of the test split in "
                rf"{re.escape(str(data))} are <unk> \(\d+ of \d+, in \d+ of its 40 lines\): it was "
                r"probably encoded with another sentencepiece model than the one the dictionary "
                r"was built from \(or holds characters the vocabulary lacks\); encode the text "
                r"with the checkpoint's own model \(data_prep/spm.py encode --model SPM.model\) "
                r"and binarize it again",
                line,
            ), line


def test_dictionary_joined_from_two_models_is_warned_about_not_refused():
    """A dictionary of both languages' pieces, each language with its own model: the English
    model covers its half."""
    english, german = {f"\u2581e{i}" for i in range(60)}, {f"\u2581g{i}" for i in range(40)}
    warned = []
    check_coverage(
        english,
        ["<s>", "<pad>", *sorted(english | german), "madeupword0000"],
        "en.model",
        "dict.txt",
        warned.append,
    )
    assert warned == [
        "the sentencepiece model en.model (60 pieces) has only 60 of the 100 symbols of dict.txt "
        "(60%): expected only if the dictionary was joined from several models (one per language); "
        "otherwise give the sentencepiece model that encoded the training data"
    ]
    check_coverage(
        english | german, sorted(english | german), "joint.model", "dict.txt", warned.append
    )
    assert len(warned) == 1
    with pytest.raises(
        FairseqExtError, match=r"has only 40 of the 100 symbols of dict.txt \(40%\): it is not"
    ):
        check_coverage(german, sorted(english | german), "de.model", "dict.txt", warned.append)

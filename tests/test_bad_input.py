"""Bad input for every model family, in process (cheap): a checkpoint from another dictionary, other
sizes or other layers, or a model of another family; empty, whitespace-only and over-long lines of
raw text along the documented path (data_prep/spm.py encode -> fairseq-preprocess -> the task); a
``.bin`` shorter than its ``.idx``; examples longer than the model's positions at generation. Each
is one ``FairseqExtError`` naming the problem and the fix. An empty line of interactive input is
named on stderr and skipped. The command-line cases (wrong ``--user-dir``, a corrupt or foreign
checkpoint in a save dir) are in ``test_bad_input_cli.py``."""

import logging
import os
import shutil
import subprocess
import sys

import pytest
import torch
from fairseq import options, utils
from fairseq.dataclass.configs import GenerationConfig
from fairseq_cli import preprocess

from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.data.size_checks import refuse_truncated_binaries
from tests.conftest import ROOT, read_sample, write_lines
from tests.helpers.families import build, dict_folder

# --------------------------------------------------------------------------- checkpoints


def _state(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def _refused_load(model, state_dict, untouched: bool = True) -> str:
    """Load ``state_dict`` as fairseq does (strict) and return the error. Shapes are checked
    before anything is copied, so the model keeps its own parameters (``untouched``); torch
    reports missing or unexpected names only after copying the others."""
    before = _state(model)
    with pytest.raises(FairseqExtError) as caught:
        model.load_state_dict(state_dict, strict=True)
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before) == untouched
    return str(caught.value)


MISMATCH = (
    "dictionary mismatch: the source dictionary of the data is not the one the checkpoint was "
    "trained with "
    "(the checkpoint's {param} has {rows} rows, the data's source dictionary has {entries} "
    "entries); binarize "
    "the data with the checkpoint's dictionary (fairseq-preprocess --srcdict DICT [--tgtdict "
    "DICT]) or give "
    "the data directory it was trained with"
)


@pytest.mark.parametrize(
    "family, param, rows",
    [
        ("hi_cmlm", "encoder.embed_tokens.weight", 34),  # 30 words and 4 special symbols
        ("prophetnet", "encoder.embed_tokens.weight", 35),  # and <mask>
        ("posmask", "encoder.sentence_encoder.embed_tokens.weight", 35),
        ("unilm", "encoder.embed_tokens.weight", 35),
        ("permutation_lm", "encoder.embed_tokens.weight", 35),
    ],
)
def test_checkpoint_from_another_dictionary_is_named(tmp_path, family, param, rows):
    """A checkpoint without recorded dictionaries (``test_checkpoint_contents.py`` tests the
    record): the vocabulary rows differ. One message for every family."""
    _, trained, _ = build(dict_folder(tmp_path / "a", 30), family)
    _, model, _ = build(dict_folder(tmp_path / "b", 40), family)
    message = _refused_load(model, trained.state_dict())
    assert message.startswith(MISMATCH.format(param=param, rows=rows, entries=rows + 10))
    if family in ("unilm", "permutation_lm"):
        assert message.endswith("(and the same --keep-tokens FILE if it was trained with one)")


@pytest.mark.parametrize(
    "family, option, param",
    [
        ("hi_cmlm", "--encoder-embed-dim", "encoder.embed_tokens.weight"),
        ("prophetnet", "--encoder-embed-dim", "encoder.embed_tokens.weight"),
        ("posmask", "--encoder-embed-dim", "encoder.sentence_encoder.embed_tokens.weight"),
        ("unilm", "--encoder-embed-dim", "encoder.embed_tokens.weight"),
    ],
)
def test_checkpoint_with_another_embedding_dimension_names_it_not_the_dictionary(
    tmp_path, family, option, param
):
    """Before: 'dictionary mismatch: ... has 6008 entries but the dictionary of the data has
    6008'."""
    folder = dict_folder(tmp_path, 30)
    wider = ["--encoder-embed-dim", "64"] + (
        ["--decoder-embed-dim", "64"] if family in ("hi_cmlm", "prophetnet") else []
    )
    _, trained, _ = build(folder, family)
    _, model, _ = build(folder, family, *wider)
    message = _refused_load(model, trained.state_dict())
    assert message.startswith(
        f"{option} differs from the checkpoint's (the checkpoint's {param} has shape "
    )
    assert "dictionary" not in message


@pytest.mark.parametrize("family", ["hi_cmlm", "unilm"])
def test_checkpoint_with_another_ffn_dimension_names_it(tmp_path, family):
    folder = dict_folder(tmp_path, 30)
    _, trained, _ = build(folder, family)
    _, model, _ = build(folder, family, "--encoder-ffn-embed-dim", "128")
    assert _refused_load(model, trained.state_dict()).startswith(
        "--encoder-ffn-embed-dim (or the embedding dimension) differs from the checkpoint's (the "
        "checkpoint's "
        "encoder.layers.0.fc1.weight has shape (64, 32), this model's (128, 32))"
    )


@pytest.mark.parametrize(
    "family, trained_with, used, expected",
    [
        (
            "prophetnet",
            ["--ngram", "2"],
            ["--ngram", "3"],
            "--ngram differs from the checkpoint's (the checkpoint's "
            "decoder.ngram_embeddings.weight has shape (2, 32), "
            "this model's (3, 32)); use the --ngram the checkpoint was trained with",
        ),
        (
            "prophetnet",
            ["--num-buckets", "32"],
            ["--num-buckets", "16"],
            "--num-buckets (or --decoder-attention-heads) differs",
        ),
        (
            "prophetnet",
            ["--max-target-positions", "64"],
            ["--max-target-positions", "32"],
            "--max-target-positions differs from the checkpoint's",
        ),
        (
            "hi_cmlm",
            ["--decoder-learned-pos", "--max-target-positions", "64"],
            ["--decoder-learned-pos", "--max-target-positions", "32"],
            "--max-target-positions differs",
        ),
        (
            "posmask",
            ["--tokens-per-sample", "64"],
            ["--tokens-per-sample", "32"],
            "--max-positions (--tokens-per-sample) differs from the checkpoint's",
        ),
        (
            "unilm",
            ["--max-positions", "64"],
            ["--max-positions", "32"],
            "--max-positions differs from the checkpoint's",
        ),
    ],
)
def test_checkpoint_with_other_sizes_names_the_option(
    tmp_path, family, trained_with, used, expected
):
    folder = dict_folder(tmp_path, 30)
    _, trained, _ = build(folder, family, *trained_with)
    _, model, _ = build(folder, family, *used)
    assert expected in _refused_load(model, trained.state_dict())


@pytest.mark.parametrize(
    "family, prefix",
    [
        ("hi_cmlm", "encoder.layers.1."),
        ("prophetnet", "encoder.layers.1."),
        ("posmask", "encoder.sentence_encoder.layers.1."),
        ("unilm", "encoder.layers.1."),
    ],
)
def test_checkpoint_with_more_layers_is_named(tmp_path, family, prefix):
    folder = dict_folder(tmp_path, 30)
    _, trained, _ = build(folder, family, "--encoder-layers", "2")
    _, model, _ = build(folder, family, "--encoder-layers", "1")
    message = _refused_load(model, trained.state_dict(), untouched=False)
    assert "the checkpoint's parameters do not match this" in message
    assert f'unexpected: "{prefix}' in message and "--encoder-layers" in message


# --------------------------------------------------------- raw text -> preprocess -> task

PAIR_FAMILIES = ("hi_cmlm", "prophetnet", "unilm")
MONO_FAMILIES = ("posmask", "permutation_lm", "prophetnet_denoising")
BAD_LINE = 3  # 1-based line of the validation split that is bad


@pytest.fixture(scope="module")
def pieces(spm_model, tmp_path_factory):
    """Raw lines encoded by data_prep/spm.py encode, the documented encoder: normal lines, an
    empty line, a whitespace-only line and a line of several hundred pieces."""
    raw = read_sample("valid", "en", 6) + ["", " \t  ", " ".join(read_sample("train", "en", 40))]
    d = tmp_path_factory.mktemp("pieces")
    write_lines(d / "raw", raw)
    with open(d / "raw") as fin:
        out = subprocess.run(
            [
                sys.executable,
                str(ROOT / "data_prep" / "spm.py"),
                "encode",
                "--model",
                str(spm_model),
            ],
            stdin=fin,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    lines = out.split("\n")[:-1]
    assert (
        len(lines) == len(raw) and lines[6] == lines[7] == ""
    )  # whitespace-only encodes to nothing
    assert len(lines[8].split()) > 300
    return {"normal": lines[:6], "empty": lines[6], "whitespace": lines[7], "long": lines[8]}


def _preprocess(*argv) -> None:
    """fairseq-preprocess, in process (fairseq_cli.preprocess.main, as the CLI calls it)."""
    preprocess.main(options.get_preprocessing_parser().parse_args([str(a) for a in argv]))
    log = logging.getLogger("fairseq_cli.preprocess")
    for handler in [h for h in log.handlers if isinstance(h, logging.FileHandler)]:
        log.removeHandler(handler)
        handler.close()


def _binarized(folder, family, lines, bad, side, dictionary):
    """A ``valid`` split whose line ``BAD_LINE`` is ``bad`` (on ``side`` for pairs)."""
    src = list(lines)
    src[BAD_LINE - 1] = bad
    raw = folder / "raw"
    raw.mkdir(parents=True)
    if family in PAIR_FAMILIES:
        tgt = list(lines)
        if side == "target":
            src, tgt = list(lines), src
        write_lines(raw / "valid.en", src)
        write_lines(raw / "valid.de", tgt)
        _preprocess(
            "-s",
            "en",
            "-t",
            "de",
            "--validpref",
            raw / "valid",
            "--srcdict",
            dictionary,
            "--joined-dictionary",
            "--destdir",
            folder / "bin",
            "--workers",
            "1",
        )
    else:
        write_lines(raw / "valid.en", src)
        lang = ["--source-lang", "en"] if family == "prophetnet_denoising" else []
        prefix = raw / "valid.en" if not lang else raw / "valid"
        _preprocess(
            "--only-source",
            *lang,
            "--validpref",
            prefix,
            "--srcdict",
            dictionary,
            "--destdir",
            folder / "bin",
            "--workers",
            "1",
        )
    return folder / "bin"


def _load_and_batch(folder, family, *extra):
    task, model, _ = build(folder, family, *extra)
    task.load_dataset("valid")
    max_positions = utils.resolve_max_positions(task.max_positions(), model.max_positions())
    task.get_batch_iterator(
        task.dataset("valid"),
        max_sentences=4,
        max_positions=max_positions,
        ignore_invalid_inputs=False,
    )


EMPTY = {
    "hi_cmlm": f"valid source line {BAD_LINE} is empty",
    "prophetnet": f"valid source line {BAD_LINE} is empty",
    "unilm": f"valid source line {BAD_LINE} is empty",
    "posmask": f"valid line {BAD_LINE} is empty",
    "permutation_lm": f"valid line {BAD_LINE} is empty",
    "prophetnet_denoising": f"valid text line {BAD_LINE} is empty",
}
LONG = {
    "hi_cmlm": f"valid target line {BAD_LINE} has",
    "prophetnet": f"valid target line {BAD_LINE} has",
    "unilm": f"valid line {BAD_LINE}: the source",
    "posmask": f"valid example {BAD_LINE} has",
    "permutation_lm": f"valid line {BAD_LINE} has",
    "prophetnet_denoising": f"valid text line {BAD_LINE} has",
}
LIMIT = {
    "hi_cmlm": "more than the 255 a CMLM can predict",
    "prophetnet": "more than --max-target-positions 64",
    "unilm": "more than the model's 64 (--max-positions)",
    "posmask": "more than --tokens-per-sample 64",
    "permutation_lm": "more than --tokens-per-sample 64 minus <s>",
    "prophetnet_denoising": "more than --max-source-positions/--max-target-positions 64",
}
EOS_MODE = {"posmask": ["--sample-break-mode", "eos"]}


@pytest.mark.parametrize("family", PAIR_FAMILIES + MONO_FAMILIES)
@pytest.mark.parametrize("kind", ["empty", "whitespace"])
def test_empty_and_whitespace_only_lines_are_named(tmp_path, tiny_data, pieces, family, kind):
    dict_folder_ = _binarized(
        tmp_path, family, pieces["normal"], pieces[kind], "source", tiny_data / "dict.en.txt"
    )
    with pytest.raises(FairseqExtError) as caught:
        _load_and_batch(dict_folder_, family, *EOS_MODE.get(family, []))
    message = str(caught.value)
    assert EMPTY[family] in message and "remove empty" in message


@pytest.mark.parametrize("family", PAIR_FAMILIES + MONO_FAMILIES)
def test_lines_longer_than_the_model_are_named_not_cut(tmp_path, tiny_data, pieces, family):
    folder = _binarized(
        tmp_path, family, pieces["normal"], pieces["long"], "target", tiny_data / "dict.en.txt"
    )
    with pytest.raises(FairseqExtError) as caught:
        _load_and_batch(folder, family, *EOS_MODE.get(family, []))
    message = str(caught.value)
    assert LONG[family] in message and LIMIT[family] in message


def test_generation_beyond_the_model_positions_is_one_error_or_a_chosen_skip(
    tmp_path, tiny_data, pieces
):
    """fairseq-generate/-validate take the model's positions from the checkpoint: an example
    beyond them is fairseq's bare Exception (with a traceback) unless skipped on request."""
    folder = _binarized(
        tmp_path,
        "hi_cmlm",
        pieces["normal"],
        pieces["normal"][0],
        "source",
        tiny_data / "dict.en.txt",
    )
    task, _, _ = build(folder, "hi_cmlm")
    task.load_dataset("valid")
    dataset = task.dataset("valid")
    longest = int(max(dataset.src_sizes))
    with pytest.raises(
        FairseqExtError,
        match=r"example #\d+ \(fairseq's 0-based id\) has size \(\d+, \d+\), more "
        r"than the model's positions \(8, 1024\).*--skip-invalid-size-inputs-valid-test",
    ):
        task.get_batch_iterator(
            dataset, max_sentences=4, max_positions=(8, 1024), ignore_invalid_inputs=False
        )
    skipped = task.get_batch_iterator(
        dataset, max_sentences=4, max_positions=(8, 1024), ignore_invalid_inputs=True
    )
    kept = sum(len(b) for b in skipped.next_epoch_itr(shuffle=False))
    assert longest > 8 and kept == int((dataset.src_sizes <= 8).sum()) < len(dataset)


@pytest.mark.parametrize("family", PAIR_FAMILIES)
def test_empty_interactive_line_is_named_and_skipped(tmp_path, family, capsys):
    """fairseq-interactive hands each buffer of input lines to build_dataset_for_inference and
    prints each result under its dataset id: an empty line is named on stderr (its number
    counted across buffers), gets no batch, and the other lines keep their ids."""
    task, model, _ = build(dict_folder(tmp_path, 30), family)
    eos = task.source_dictionary.eos()

    def batched_ids(dataset):
        itr = task.get_batch_iterator(dataset, max_sentences=4, max_positions=model.max_positions())
        return sorted(
            i for batch in itr.next_epoch_itr(shuffle=False) for i in batch["id"].tolist()
        )

    assert batched_ids(task.build_dataset_for_inference([torch.tensor([10, 11, eos])], [3])) == [0]
    assert capsys.readouterr().err == ""
    dataset = task.build_dataset_for_inference(
        [torch.tensor([eos]), torch.tensor([12, eos]), torch.tensor([eos])], [1, 2, 1]
    )
    assert batched_ids(dataset) == [1]
    assert capsys.readouterr().err.splitlines() == [
        "fairseq_ext: input line 2 is empty: skipped, nothing is printed for id 1 (give one "
        "source sentence per line)",
        "fairseq_ext: input line 4 is empty: skipped, nothing is printed for id 3 (give one "
        "source sentence per line)",
    ]
    assert batched_ids(task.build_dataset_for_inference([torch.tensor([eos])], [1])) == []
    assert "input line 5 is empty" in capsys.readouterr().err


def test_over_long_interactive_line_still_ends_the_session(tmp_path):
    """A line the model cannot take is an error, as in a binarized split."""
    task, _, _ = build(dict_folder(tmp_path, 30), "prophetnet")
    with pytest.raises(
        FairseqExtError, match="input line 1 has 65 tokens, more than --max-source-positions 64"
    ):
        task.build_dataset_for_inference([torch.arange(65)], [65])


# ------------------------------------------------- another family's checkpoint, incomplete .bin


@pytest.mark.parametrize(
    "family, arch, expected",
    [
        (
            "hi_cmlm",
            "transformer",
            "--path: the checkpoint holds a TransformerModel, but --task cmlm_hybrid decodes "
            "with mask-predict, which needs a conditional masked LM",
        ),
        (
            "unilm",
            "roberta",
            "--task unilm_seq2seq runs on one stack: use --arch unilm_transformer",
        ),
        (
            "permutation_lm",
            "roberta",
            "--task permutation_lm runs on one stack: use --arch unilm_transformer",
        ),
    ],
)
def test_model_of_another_family_is_named(tmp_path, family, arch, expected):
    """What fairseq-generate does with a checkpoint: the task builds the checkpoint's model,
    then its generator. cmlm_hybrid refuses an autoregressive model there (fairseq stops
    with "'TransformerModel' object has no attribute 'forward_encoder'" when decoding)."""
    folder = dict_folder(tmp_path, 30)
    with pytest.raises(FairseqExtError) as caught:
        task, model, _ = build(folder, family, "--arch", arch)
        task.build_generator([model], GenerationConfig())
    assert expected in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("family", PAIR_FAMILIES + MONO_FAMILIES)
@pytest.mark.parametrize("kept", [0.5, 0.0])
def test_incomplete_bin_is_named_when_the_split_is_loaded(
    tmp_path, tiny_data, pieces, family, kept
):
    """An interrupted fairseq-preprocess or copy leaves a .bin shorter than its .idx says;
    fairseq would stop in numpy ("offset must be non-negative and no greater than buffer
    length", or "cannot mmap an empty file") at the first example past the end."""
    folder = _binarized(
        tmp_path, family, pieces["normal"], pieces["normal"][0], "source", tiny_data / "dict.en.txt"
    )
    binary = max(folder.glob("valid*.bin"), key=lambda p: p.stat().st_size)
    full = binary.stat().st_size
    os.truncate(binary, int(full * kept))
    with pytest.raises(FairseqExtError) as caught:
        _load_and_batch(folder, family, *EOS_MODE.get(family, []))
    assert str(caught.value) == (
        f"{binary} has {int(full * kept)} bytes but {binary.with_suffix('.idx')} indexes {full}: "
        f"the binarized "
        "valid split is incomplete (an interrupted fairseq-preprocess or copy?); binarize it "
        "again with "
        "fairseq-preprocess"
    )


@pytest.mark.parametrize("impl", ["mmap", "cached"])
def test_incomplete_bin_of_a_shard_in_either_format_is_named(tmp_path, tiny_data, pieces, impl):
    """fairseq's two binary formats, and the shards (``valid1``, ...) that ``combine`` reads."""
    raw = tmp_path / "raw"
    raw.mkdir()
    write_lines(raw / "valid.en", pieces["normal"])
    folder = tmp_path / "bin"
    _preprocess(
        "--only-source",
        "--validpref",
        raw / "valid.en",
        "--srcdict",
        tiny_data / "dict.en.txt",
        "--destdir",
        folder,
        "--workers",
        "1",
        "--dataset-impl",
        impl,
    )
    for suffix in (".bin", ".idx"):
        shutil.copyfile(folder / f"valid{suffix}", folder / f"valid1{suffix}")
    refuse_truncated_binaries(str(folder), "valid")  # complete
    full = (folder / "valid1.bin").stat().st_size
    os.truncate(folder / "valid1.bin", full - 1)
    with pytest.raises(
        FairseqExtError, match=f"valid1.bin has {full - 1} bytes but .*valid1.idx indexes {full}:"
    ):
        refuse_truncated_binaries(str(folder), "valid")

"""Data that fairseq-preprocess left half-made, or that was edited by hand, as the commands meet
it (issue 83): a fairseq-preprocess killed before it wrote the target side, a dictionary that
repeats a token or lost a count, ``--max-tokens`` below an example. Each is one line and exit 1
before any work starts, the data left as they were; the data scripts' ``preprocess`` (the one
every ``data_prep/*.sh`` binarizes with) runs again after a kill and completes."""

import hashlib
import os
import shutil
import signal
import subprocess
import time

import pytest
from fairseq.data import Dictionary

from fairseq_ext import hub
from fairseq_ext.common.errors import FairseqExtError
from tests.conftest import ROOT, USER_DIR, cli_env, generate_args, run, train_args

MODEL = ROOT / "examples" / "quickstart" / "model"
COMMON_SH = ROOT / "data_prep" / "common.sh"
# --arch and --criterion of each sequence-to-sequence task (the check comes before the model)
SEQ2SEQ = {
    "cmlm_hybrid": ("hi_cmlm_transformer_tiny", "nat_loss"),
    "translation_prophetnet": ("prophetnet_tiny", "ngram_language_loss"),
    "unilm_seq2seq": ("unilm_transformer_tiny", "label_smoothed_cross_entropy"),
}


def _hashes(folder):
    return {
        name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
        for name in sorted(os.listdir(folder))
    }


def _one_error(proc, *parts):
    """The command's one ``fairseq_ext: error:`` line (exit 1, no traceback), holding ``parts``."""
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, proc.stderr[-3000:]
    for part in parts:
        assert part in errors[0], errors[0]
    return errors[0]


def _preprocess_args(raw, srcdict):
    """fairseq-preprocess of ``raw``/{big,valid,test}.{en,de} with ``srcdict`` (no --destdir)."""
    return [
        "-s",
        "en",
        "-t",
        "de",
        "--trainpref",
        raw / "big",
        "--validpref",
        raw / "valid",
        "--testpref",
        raw / "test",
        "--srcdict",
        srcdict,
        "--joined-dictionary",
        "--workers",
        "1",
    ]


@pytest.fixture
def big_raw(tiny_data, tmp_path):
    """The tiny set's encoded text, its training target side 50 times over (20,000 lines), so
    that fairseq-preprocess spends seconds on the target side, after the source side."""
    raw, out = tiny_data.parent / "raw", tmp_path / "raw"
    out.mkdir()
    for split in ("valid", "test"):
        for lang in ("en", "de"):
            shutil.copy(raw / f"{split}.{lang}", out / f"{split}.{lang}")
    shutil.copy(raw / "train.en", out / "big.en")
    (out / "big.de").write_text((raw / "train.de").read_text() * 50)
    return out


def _killed(args, started):
    """Run ``args`` (a real process, in a session of its own) until the file ``started`` exists,
    then SIGKILL its process group."""
    proc = subprocess.Popen(
        [str(a) for a in args],
        env=cli_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proc.poll() is None, f"{args[0]} ended before {started.name} was begun"
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)


def test_a_killed_fairseq_preprocess_is_named_before_any_task_starts(
    tiny_data, tiny_checkpoint, big_raw, tmp_path
):
    half = tmp_path / "bin"
    args = ["fairseq-preprocess", *_preprocess_args(big_raw, tiny_data / "dict.en.txt")]
    _killed([*args, "--destdir", half], half / "train.en-de.de.bin")
    # what the kill left: the source side whole, the target side begun, not indexed
    assert (half / "train.en-de.en.idx").exists() and not (half / "train.en-de.de.idx").exists()
    before = _hashes(half)
    for task, (arch, criterion) in SEQ2SEQ.items():
        save = tmp_path / f"ck_{task}"
        train = [
            "fairseq-train",
            half,
            "--user-dir",
            USER_DIR,
            "--task",
            task,
            "-s",
            "en",
            "-t",
            "de",
            "--arch",
            arch,
            "--criterion",
            criterion,
            "--optimizer",
            "adam",
            "--lr",
            "5e-4",
            "--max-tokens",
            "2000",
            "--max-update",
            "1",
            "--save-dir",
            save,
        ]
        _one_error(
            run(train, check=False),
            f"{half} holds half of the train split",
            "but not train.en-de.de.idx",
            "fairseq-preprocess is stopped before it ends",
        )
        assert not save.exists()
        generate = generate_args(half, tiny_checkpoint, subset="train")
        generate[generate.index("cmlm_hybrid")] = task
        _one_error(run(generate, check=False), "holds half of the train split")
    assert _hashes(half) == before


def _script_preprocess(dest, args):
    """``preprocess`` of ``data_prep/common.sh`` (what every data script binarizes with) on
    ``args``, into ``dest``."""
    call = 'source "$0"; preprocess "$@"'
    return ["bash", "-c", call, COMMON_SH, dest, dest.parent / "preprocess.log", *args]


def test_the_data_scripts_binarize_again_after_a_kill(tiny_data, big_raw, tmp_path):
    """Killed while an earlier binarization is in place: that one is kept whole; the same
    command run again replaces it with what fairseq-preprocess writes in one go."""
    args = _preprocess_args(big_raw, tiny_data / "dict.en.txt")
    reference = tmp_path / "reference"
    run(["fairseq-preprocess", *args, "--destdir", reference])
    os.remove(reference / "preprocess.log")  # its own log, with its paths
    dest = tmp_path / "bin"
    shutil.copytree(reference, dest)
    (dest / "train.en-de.de.bin").write_bytes(b"an earlier binarization")
    earlier = _hashes(dest)
    _killed(_script_preprocess(dest, args), dest.parent / "bin.partial" / "train.en-de.de.bin")
    assert _hashes(dest) == earlier
    run(_script_preprocess(dest, args))  # the same command again
    assert not (tmp_path / "bin.partial").exists()
    assert _hashes(dest) == _hashes(reference) | {"preprocess.log": _hashes(dest)["preprocess.log"]}


def _malformed(text, case):
    """``text`` of a dictionary with line 30 repeated as line 60 (``repeat``) or without its
    count (``count``), and the line number and token the message names."""
    lines = text.splitlines(keepends=True)
    token = lines[29].split()[0]
    if case == "repeat":
        return "".join(lines[:59] + [lines[29]] + lines[59:]), 60, token
    return "".join(lines[:29] + [token + "\n"] + lines[30:]), 30, token


@pytest.mark.parametrize("case", ["repeat", "count"])
def test_a_malformed_dictionary_is_one_line_for_every_reader(
    case, tiny_data, tiny_checkpoint, big_raw, tmp_path
):
    text, line, token = _malformed((tiny_data / "dict.en.txt").read_text(encoding="utf-8"), case)
    data = tmp_path / "data"
    shutil.copytree(tiny_data, data)
    (data / "dict.en.txt").write_text(text, encoding="utf-8")
    with pytest.raises((RuntimeError, ValueError)):  # fairseq's own reading fails on it
        Dictionary.load(str(data / "dict.en.txt"))
    before = _hashes(data)
    said = "repeats the token" if case == "repeat" else "has no count"
    named = f"dictionary {data / 'dict.en.txt'} line {line}"
    _one_error(run(generate_args(data, tiny_checkpoint), check=False), named, token, said)
    assert _hashes(data) == before

    model = tmp_path / "model"  # the Python API on a model folder with that dictionary
    shutil.copytree(MODEL, model, ignore=shutil.ignore_patterns("teacher.pt"))
    shipped = (MODEL / "dict.en.txt").read_text(encoding="utf-8")
    text, line, token = _malformed(shipped, case)
    (model / "dict.en.txt").write_text(text, encoding="utf-8")
    with pytest.raises(FairseqExtError, match=f"dict.en.txt line {line} .*{said}"):
        hub.from_pretrained(model)

    dest = tmp_path / "bin"  # the data scripts' fairseq-preprocess --srcdict
    proc = run(_script_preprocess(dest, _preprocess_args(big_raw, data / "dict.en.txt")), False)
    _one_error(proc, named, said)
    assert proc.stderr.count("\n") == 1
    assert not dest.exists() and not (tmp_path / "bin.partial").exists()


def _lengths(tiny_data, split):
    """Each pair's length as cmlm_hybrid batches it, from the encoded text: the longer side's
    pieces, with <s> and </s>."""
    raw = tiny_data.parent / "raw"
    en, de = ((raw / f"{split}.{lang}").read_text().splitlines() for lang in ("en", "de"))
    return [max(len(s.split()), len(t.split())) + 2 for s, t in zip(en, de)]


def test_max_tokens_below_an_example_names_the_split_line_and_length(
    tiny_data, tiny_checkpoint, tmp_path
):
    before = _hashes(tiny_data)
    for split in ("test", "train"):
        lengths = _lengths(tiny_data, split)
        limit = sorted(lengths)[len(lengths) // 2]
        first = next(i for i, n in enumerate(lengths) if n > limit)
        expected = (
            f"{split} line {first + 1} of {tiny_data} has {lengths[first]} tokens, more than "
            f"--max-tokens {limit} ({sum(n > limit for n in lengths)} of the {len(lengths)} are; "
            f"the longest has {max(lengths)})"
        )
        if split == "test":
            proc = run(generate_args(tiny_data, tiny_checkpoint, "--max-tokens", limit), False)
        else:
            save = tmp_path / "ck"
            proc = run(train_args(tiny_data, save, "--max-tokens", limit), check=False)
            assert not list(save.glob("*.pt"))
        _one_error(proc, expected)
    # the longest test pair as --max-tokens: every sentence decoded
    longest = max(_lengths(tiny_data, "test"))
    proc = run(generate_args(tiny_data, tiny_checkpoint, "--max-tokens", longest))
    assert sum(line.startswith("H-") for line in proc.stdout.splitlines()) == 21
    assert _hashes(tiny_data) == before

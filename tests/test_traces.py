"""Input that used to end in a Python traceback, now one line naming the problem and the fix:
a missing or empty split and a missing dictionary (every task, in process; ``fairseq-generate``
on the command line), text that is not UTF-8 through ``fairseq-interactive`` and
``data_prep/spm.py`` (file, line and byte; nothing written), and a legacy-format checkpoint
with a foreign global (named without repeating torch's advice to load with
``weights_only=False``). The data scripts check their input text before anything is made from
it, and a full disk while ``fairseq-preprocess`` writes (a small tmpfs) leaves no cut
dictionary."""

import argparse
import os
import subprocess
import sys

import pytest
import torch

from fairseq_ext.common.errors import FairseqExtError
from tests.conftest import ROOT, USER_DIR, cli_env, generate_args, read_sample, run, write_lines
from tests.helpers.families import build, dict_folder
from tests.helpers.filesystems import tmpfs
from tests.test_bad_input import MONO_FAMILIES, PAIR_FAMILIES, _preprocess

EOS_MODE = {"posmask": ["--sample-break-mode", "eos"]}


@pytest.mark.parametrize("family", PAIR_FAMILIES + MONO_FAMILIES)
def test_missing_split_is_named_with_the_fix(tmp_path, family):
    folder = dict_folder(tmp_path, 30)
    task, _, _ = build(folder, family, *EOS_MODE.get(family, []))
    with pytest.raises(FairseqExtError) as caught:
        task.load_dataset("valid")
    if family == "prophetnet_denoising":  # its own check, before the shared one
        assert str(caught.value).startswith(f"no binarized 'valid' split for 'en' in {folder}")
        return
    assert str(caught.value) == (
        f"Dataset not found: valid (no valid*.idx in {folder}); binarize it with "
        f"fairseq-preprocess --validpref PREFIX --destdir {folder} (with the same dictionaries), "
        "or name a split the folder has (none) with --gen-subset/--valid-subset"
    )


@pytest.mark.parametrize("family", PAIR_FAMILIES + MONO_FAMILIES)
def test_empty_split_is_named(tmp_path, tiny_data, family):
    raw = tmp_path / "raw"
    raw.mkdir()
    for name in ("valid.en", "valid.de"):
        (raw / name).write_text("")
    dictionary = tiny_data / "dict.en.txt"
    if family in PAIR_FAMILIES:
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
            tmp_path / "bin",
            "--workers",
            "1",
        )
    else:
        lang = ["--source-lang", "en"] if family == "prophetnet_denoising" else []
        _preprocess(
            "--only-source",
            *lang,
            "--validpref",
            raw / "valid" if lang else raw / "valid.en",
            "--srcdict",
            dictionary,
            "--destdir",
            tmp_path / "bin",
            "--workers",
            "1",
        )
    task, _, _ = build(tmp_path / "bin", family, *EOS_MODE.get(family, []))
    with pytest.raises(
        FairseqExtError,
        match=r"the valid split .*valid.*\{idx,bin\} is empty \(0 lines\): binarize it "
        "again from a non-empty text file",
    ):
        task.load_dataset("valid")


def test_generate_with_a_missing_gen_subset_is_one_line(tiny_data, tiny_checkpoint):
    proc = run(generate_args(tiny_data, tiny_checkpoint, subset="valid2"), check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert (
        f"fairseq_ext: error: Dataset not found: valid2 (no valid2*.idx in {tiny_data}); binarize "
        "it with fairseq-preprocess --validpref PREFIX"
    ) in proc.stderr
    assert "or name a split the folder has (test, train, valid)" in proc.stderr


@pytest.mark.parametrize("family", PAIR_FAMILIES + MONO_FAMILIES)
def test_missing_dictionary_is_named(tmp_path, family):
    """A folder without fairseq-preprocess's dict.*.txt (fairseq: a bare FileNotFoundError)."""
    folder = tmp_path / "data"
    folder.mkdir()
    with pytest.raises(FairseqExtError, match=r"dict\.(en\.)?txt does not exist"):
        build(folder, family)


def test_generate_without_a_dictionary_is_one_line(tiny_data, tiny_checkpoint, tmp_path):
    for name in os.listdir(tiny_data):
        if name.startswith("test."):
            os.symlink(tiny_data / name, tmp_path / name)
    proc = run(generate_args(tmp_path, tiny_checkpoint), check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert (
        f"fairseq_ext: error: {tmp_path / 'dict.en.txt'} does not exist: give the data directory "
        "fairseq-preprocess wrote"
    ) in proc.stderr


NOT_UTF8 = b"\xe9t\xe9"  # "ete" in Latin-1


def test_interactive_input_that_is_not_utf8_names_file_and_line(
    tiny_data, tiny_checkpoint, tmp_path
):
    good = (tiny_data.parent / "raw" / "test.en").read_text(encoding="utf-8").splitlines()[:2]
    text = tmp_path / "input.en"
    text.write_bytes(
        good[0].encode() + b"\n" + b"an " + NOT_UTF8 + b"\n" + good[1].encode() + b"\n"
    )
    proc = run(
        [
            "fairseq-interactive",
            tiny_data,
            "--user-dir",
            USER_DIR,
            "--task",
            "cmlm_hybrid",
            "-s",
            "en",
            "-t",
            "de",
            "--path",
            tiny_checkpoint,
            "--input",
            text,
        ],
        check=False,
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert (
        f"fairseq_ext: error: {text} line 2 is not valid UTF-8 (byte 0xe9 at column 4); convert "
        "the text to UTF-8 first"
    ) in proc.stderr
    assert (
        "H-0\t" in proc.stdout and "H-1\t" not in proc.stdout
    )  # line 1 was decoded before line 2 was read


@pytest.mark.parametrize("command", ["encode", "decode"])
def test_spm_py_refuses_text_that_is_not_utf8_before_writing(spm_model, command):
    data = b"a good line\nsecond line\nthird " + NOT_UTF8 + b" line\n"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "data_prep" / "spm.py"), command, "--model", str(spm_model)],
        input=data,
        capture_output=True,
    )
    assert proc.returncode == 1 and proc.stdout == b""
    assert proc.stderr.decode() == (
        "spm.py: error: standard input line 3 is not valid UTF-8 (byte 0xe9 at column 7); "
        "convert the text to UTF-8 first, e.g. iconv -f latin1 -t utf-8. Nothing was "
        "written\n"
    )


def test_spm_py_clean_pair_refuses_before_writing(tmp_path):
    write_lines(tmp_path / "a.en", ["one", "two"])
    (tmp_path / "a.de").write_bytes(b"eins\nzw" + NOT_UTF8 + b"\n")
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "data_prep" / "spm.py"),
            "clean-pair",
            tmp_path / "a.en",
            tmp_path / "a.de",
            tmp_path / "out.en",
            tmp_path / "out.de",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith(
        f"spm.py: error: {tmp_path / 'a.de'} line 2 is not valid UTF-8 (byte 0xe9 at column 3)"
    )
    assert sorted(os.listdir(tmp_path)) == ["a.de", "a.en"]


NOT_UTF8_FIX = "convert the text to UTF-8 first, e.g. iconv -f latin1 -t utf-8. Nothing was written"
QUICKSTART_MODEL = ROOT / "examples" / "quickstart" / "model"


def test_spm_py_train_refuses_text_that_is_not_utf8_before_writing(tmp_path):
    """Before: sentencepiece trained on it, exit 0, a U+FFFD piece in the vocabulary."""
    write_lines(tmp_path / "a.txt", ["a good line"] * 20)
    (tmp_path / "b.txt").write_bytes(b"one line\nd" + NOT_UTF8 + b" vu\n")
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "data_prep" / "spm.py"),
            "train",
            "--model",
            tmp_path / "spm",
            "--vocab-size",
            "20",
            tmp_path / "a.txt",
            tmp_path / "b.txt",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert proc.stderr == (
        f"spm.py: error: {tmp_path / 'b.txt'} line 2 is not valid UTF-8 (byte 0xe9 at column 2); "
        f"{NOT_UTF8_FIX}\n"
    )
    assert sorted(os.listdir(tmp_path)) == ["a.txt", "b.txt"]


def _latin1_line_3(lines: list[str]) -> bytes:
    return (
        "".join(line + "\n" for line in lines[:2]).encode()
        + b"caf"
        + NOT_UTF8
        + b"\n"
        + "".join(line + "\n" for line in lines[3:]).encode()
    )


@pytest.mark.parametrize("script", ["multi30k", "gigaword", "wikitext2"])
def test_data_script_checks_the_encoding_before_fairseq_preprocess(tmp_path, script):
    """A Latin-1 training text given to a data script: one line naming the file, line 3 and the
    byte, before anything is made from it (before: ``ValueError: negative seek position -1`` inside
    fairseq-preprocess, or spm.py naming "standard input")."""
    local = tmp_path / "local"
    local.mkdir()
    en, de = read_sample("train", "en", 30), read_sample("train", "de", 30)
    bad = {
        "multi30k": local / "train.en",
        "gigaword": local / "train10k.article.txt",
        "wikitext2": local / "wiki.train.raw",
    }[script]
    others = {
        "multi30k": {"train.de": de, "val.en": en[:5], "val.de": de[:5]},
        "gigaword": {
            "train10k.title.txt": de,
            "valid1k.article.txt": en[:5],
            "valid1k.title.txt": de[:5],
        },
        "wikitext2": {"wiki.valid.raw": [" = A = ", *en[:5]]},
    }[script]
    bad.write_bytes(_latin1_line_3(en))
    for name, lines in others.items():
        write_lines(local / name, lines)
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            "bash",
            str(ROOT / "data_prep" / f"{script}.sh"),
            "--local",
            str(local),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=cli_env(),
    )
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == (
        f"spm.py: error: {bad} line 3 is not valid UTF-8 (byte 0xe9 at column 4); {NOT_UTF8_FIX}"
    )
    assert "Traceback" not in proc.stderr
    assert not [p for p in out.rglob("*") if p.is_file()]


def _multi30k(local, out):
    """data_prep/multi30k.sh with the quickstart model's sentencepiece model and 76 KB
    dictionary."""
    env = {
        **cli_env(),
        "SPM_MODEL": str(QUICKSTART_MODEL / "spm.model"),
        "SRCDICT": str(QUICKSTART_MODEL / "dict.en.txt"),
    }
    return subprocess.run(
        ["bash", str(ROOT / "data_prep" / "multi30k.sh"), "--local", str(local), "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
    )


def _fill(disk, leave_kib):
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    (disk / "filler").write_bytes(b"\0" * (free - leave_kib * 1024))


def test_full_disk_during_fairseq_preprocess_leaves_no_cut_dictionary(tmp_path):
    """data_prep/multi30k.sh on a tmpfs that fills while fairseq-preprocess writes the dictionary:
    a 128 KiB one (the text and its pieces take 80 KiB), then, after a complete run on 4 MiB, one
    filled to 56 KiB free. Before: ``OSError: [Errno 28]`` and a cut ``dict.en.txt`` in OUT/bin that
    the next command misread."""
    local = tmp_path / "local"
    local.mkdir()
    for name, split, n in (("train", "train", 100), ("val", "valid", 20)):
        for lang in ("en", "de"):
            write_lines(local / f"{name}.{lang}", read_sample(split, lang, n))
    with tmpfs(tmp_path / "disk", 128) as disk:
        out = disk / "out"
        proc = _multi30k(local, out)
        assert proc.returncode != 0 and "Traceback" not in proc.stderr.splitlines()[-1]
        assert proc.stderr.splitlines()[-1] == (
            "error: no space left on the device while fairseq-preprocess wrote "
            f"{out / 'bin.partial'} (removed; no {out / 'bin'} was made); free space there (df -h) "
            "and run the same command again"
        )
        assert not list(out.rglob("dict*")) and not (out / "bin").exists()
        subprocess.run(["mount", "-o", "remount,size=4096k", str(disk)], check=True)
        assert _multi30k(local, out).returncode == 0
        complete = {p.name: p.read_bytes() for p in (out / "bin").iterdir()}
        _fill(disk, 56)  # room for clean-pair's temporary files, not for the dictionary
        proc = _multi30k(local, out)
        assert proc.returncode != 0 and proc.stderr.splitlines()[-1] == (
            "error: no space left on the device while fairseq-preprocess wrote "
            f"{out / 'bin.partial'} (removed; the earlier {out / 'bin'} is kept); free space there "
            "(df -h) and run the same command again"
        )
        assert {p.name: p.read_bytes() for p in (out / "bin").iterdir()} == complete
        assert not (out / "bin.partial").exists() and not list(out.rglob("*.partial-*"))


class _RunsCommand:
    def __reduce__(self):
        return (os.system, ("true",))


def test_legacy_format_checkpoint_with_a_foreign_global_is_named_without_torchs_advice(
    tiny_checkpoint, tmp_path
):
    from fairseq import checkpoint_utils

    state = torch.load(tiny_checkpoint, map_location="cpu", weights_only=True)
    state["extra_state"]["payload"] = _RunsCommand()
    path = tmp_path / "legacy.pt"
    torch.save(
        state, path, _use_new_zipfile_serialization=False
    )  # torch < 1.6's format: no listing of globals
    with pytest.raises(FairseqExtError) as caught:
        checkpoint_utils.load_checkpoint_to_cpu(str(path))
    message = str(caught.value)
    assert message.startswith(
        f"refusing to load {path}: it pickles posix.system, which fairseq_ext does not allow"
    )
    assert "weights_only" not in message and "\n" not in message
    assert isinstance(
        state["cfg"]["model"], argparse.Namespace
    )  # the plugin's own globals stay allowed


def test_language_model_data_for_prophetnet_denoising_names_the_fix(mono_data, tmp_path):
    """Data binarized without ``-s`` (``dict.txt``): no ``--source-lang`` fits, the line says to
    binarize with ``-s LANG`` (before: "0 dict.*.txt files; name the side with --source-lang")."""
    expected = (
        f"{mono_data} was binarized for a language model (dict.txt, no language); "
        "prophetnet_denoising reads dict.LANG.txt and no --source-lang fits: binarize it again "
        "with fairseq-preprocess --only-source -s LANG (e.g. -s en) and give the same --source-lang"
    )
    with pytest.raises(FairseqExtError) as refused:
        build(mono_data, "prophetnet_denoising")  # with --source-lang en
    assert str(refused.value) == expected
    proc = run(
        [
            "fairseq-train",
            mono_data,
            "--user-dir",
            USER_DIR,
            "--task",
            "prophetnet_denoising",
            "--arch",
            "prophetnet_tiny",
            "--criterion",
            "ngram_language_loss",
            "--max-tokens",
            "1000",
            "--save-dir",
            tmp_path / "save",
        ],
        check=False,
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == f"fairseq_ext: error: {expected}"
    assert (
        list((tmp_path / "save").iterdir()) == []
    )  # fairseq made the folder before the task; nothing in it

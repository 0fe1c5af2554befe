"""Bad input as the command line meets it: a wrong ``--user-dir`` (fairseq imports it before any
plugin code runs; ``examples/`` answers for itself); a corrupt or foreign ``checkpoint_last.pt``
in the save dir of a run that resumes (one clear line, a non-zero exit, and the save dir left as
it was); a checkpoint of another family, a decoding option out of range and an incomplete
``.bin`` at generation. The paths a command is given, checked before any work with the shipped
quickstart model (``fairseq_ext.fairseq_changes.preflight``): a missing checkpoint or
``--input``, a ``--results-path`` on a read-only mount or that is a file, a dictionary that a
full disk cut (a small tmpfs that fills while fairseq-preprocess writes it), a missing or
unreadable ``--sentencepiece-model``."""

import os
import re
import shutil
import sys

import pytest
import torch

from fairseq_ext.checkpoints import safe_load
from tests.conftest import ROOT, TINY_DIMS, USER_DIR, generate_args, run, train_args
from tests.helpers.filesystems import as_unprivileged, tmpfs

MODEL = ROOT / "examples" / "quickstart" / "model"


def _snapshot(folder):
    return {name: (folder / name).read_bytes() for name in sorted(os.listdir(folder))}


def _with_user_dir(args, folder):
    args = list(args)
    args[args.index("--user-dir") + 1] = folder
    return args


def test_missing_user_dir_is_fairseqs_own_error(tiny_data, tmp_path):
    """Nothing of the plugin is loaded yet: fairseq's FileNotFoundError names the folder."""
    missing = tmp_path / "no_such_folder"
    proc = run(_with_user_dir(train_args(tiny_data, tmp_path / "ck"), missing), check=False)
    assert proc.returncode != 0
    assert f"FileNotFoundError: {missing}" in proc.stderr
    assert not (tmp_path / "ck").exists()


def test_user_dir_that_is_not_the_plugin_leaves_the_task_unknown(tiny_data, tmp_path):
    """A folder without ``__init__.py`` (one elsewhere, or the repository root) is imported as an
    empty namespace package before any code of the plugin runs: argparse refuses the plugin's
    task by name, fairseq's own answer."""
    other = tmp_path / "not_the_plugin"
    other.mkdir()
    (other / "notes.txt").write_text("not a fairseq plugin\n")
    for folder in (other, ROOT):
        proc = run(_with_user_dir(train_args(tiny_data, tmp_path / "ck"), folder), check=False)
        assert proc.returncode == 2
        assert "argument --task: invalid choice: 'cmlm_hybrid'" in proc.stderr
        assert "Traceback" not in proc.stderr
        assert not (tmp_path / "ck").exists()


def test_user_dir_naming_the_examples_folder_names_the_plugin(tiny_data, tmp_path):
    """``--user-dir examples``: fairseq imports ``examples/__init__.py``, which says which folder
    holds the plugin (before: argparse's ``invalid choice: 'cmlm_hybrid'``, blaming --task). A
    fresh process: the forking server has imported ``examples`` already (fairseq looks for
    ``examples.simultaneous_translation`` on a path that holds the repository root)."""
    for command in (
        train_args(tiny_data, tmp_path / "ck"),
        generate_args(tiny_data, tmp_path / "ck.pt"),
    ):
        proc = run(_with_user_dir(command, ROOT / "examples"), check=False, fresh=True)
        assert proc.returncode == 1
        assert proc.stderr.splitlines()[-1] == (
            f"fairseq_ext: error: --user-dir {ROOT / 'examples'} holds no fairseq plugin: it "
            f"registers no task, model "
            f"or criterion (so --task would be refused as an invalid choice); the plugin is "
            f"{USER_DIR}: give "
            f"--user-dir {USER_DIR}"
        )
        assert (
            "Traceback" not in proc.stderr and "argument --task: invalid choice" not in proc.stderr
        )
        assert not (tmp_path / "ck").exists()


class _RunsCommand:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _truncated(good, path, marker):
    data = good.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def _foreign(good, path, marker):
    state = safe_load(str(good))
    state["extra_state"]["payload"] = _RunsCommand(marker)
    torch.save(state, path)


@pytest.mark.parametrize(
    "spoil, message", [(_truncated, "cannot read checkpoint"), (_foreign, "refusing to load")]
)
def test_bad_checkpoint_last_in_save_dir_is_refused_and_left_alone(
    tiny_data, tiny_checkpoint, tmp_path, spoil, message
):
    """Resuming (fairseq-train reads SAVE_DIR/checkpoint_last.pt) from a spoilt file stops with
    one line; the save dir keeps exactly its files (fairseq writes nothing before loading)."""
    save = tmp_path / "save"
    save.mkdir()
    marker = tmp_path / "code-was-executed"
    spoil(tiny_checkpoint, save / "checkpoint_last.pt", marker)
    (save / "checkpoint_best.pt").write_bytes(tiny_checkpoint.read_bytes())
    before = _snapshot(save)
    proc = run(train_args(tiny_data, save, updates=8), check=False)
    assert proc.returncode != 0
    assert (
        f"fairseq_ext: error: {message}" in proc.stderr
        and str(save / "checkpoint_last.pt") in proc.stderr
    )
    assert "Traceback" not in proc.stderr
    assert _snapshot(save) == before
    assert not marker.exists()


def _refused(proc, message):
    assert proc.returncode != 0
    assert f"fairseq_ext: error: {message}" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


@pytest.fixture(scope="module")
def transformer_checkpoint(tiny_data, tmp_path_factory):
    """An autoregressive ``transformer`` trained for one update by stock fairseq."""
    save = tmp_path_factory.mktemp("transformer")
    run(
        [
            "fairseq-train",
            tiny_data,
            "--task",
            "translation",
            "-s",
            "en",
            "-t",
            "de",
            "--arch",
            "transformer",
            *TINY_DIMS,
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
            "--no-progress-bar",
            "--num-workers",
            "0",
            "--disable-validation",
            "--no-epoch-checkpoints",
        ]
    )
    return save / "checkpoint_last.pt"


def test_autoregressive_checkpoint_for_mask_predict_is_named(tiny_data, transformer_checkpoint):
    """Without the check fairseq stops in mask-predict with "'TransformerModel' object has no
    attribute 'forward_encoder'"."""
    proc = run(generate_args(tiny_data, transformer_checkpoint), check=False)
    _refused(
        proc,
        "--path: the checkpoint holds a TransformerModel, but --task cmlm_hybrid decodes with "
        "mask-predict",
    )
    assert "--task translation" in proc.stderr


def test_out_of_range_decoding_option_is_refused_not_clamped(tiny_data, tiny_checkpoint):
    """fairseq's generator decodes --iter-decode-with-beam -2 with one length candidate."""
    proc = run(
        generate_args(tiny_data, tiny_checkpoint, "--iter-decode-with-beam", "-2"), check=False
    )
    _refused(
        proc,
        "--iter-decode-with-beam must be >= 1 (the number of length candidates per sentence), got "
        "-2",
    )
    assert "H-" not in proc.stdout


def test_incomplete_bin_is_named_at_generation(tiny_data, tiny_checkpoint, tmp_path):
    """A test split whose .bin an interrupted copy cut short; without the check fairseq stops
    in numpy at the first example past the end."""
    data = tmp_path / "bin"
    shutil.copytree(tiny_data, data)
    binary = data / "test.en-de.en.bin"
    full = binary.stat().st_size
    os.truncate(binary, full // 2)
    proc = run(generate_args(data, tiny_checkpoint), check=False)
    _refused(
        proc, f"{binary} has {full // 2} bytes but {data / 'test.en-de.en.idx'} indexes {full}"
    )


@pytest.mark.parametrize(
    "task, arch, criterion",
    [
        ("cmlm_hybrid", "hi_cmlm_transformer_tiny", "nat_loss"),
        ("translation_prophetnet", "prophetnet_tiny", "ngram_language_loss"),
        ("unilm_seq2seq", "unilm_transformer_tiny", "label_smoothed_cross_entropy"),
        ("prophetnet_denoising", "prophetnet_tiny", "ngram_language_loss"),
    ],
)
def test_missing_or_unnamed_data_folder_is_one_line(task, arch, criterion, tmp_path):
    """A data folder that does not exist, and (translation-style tasks) one with no binarized
    pair to infer -s/-t from: fairseq stopped with a bare FileNotFoundError or Exception."""
    empty = tmp_path / "empty"
    empty.mkdir()
    (tmp_path / "afile").write_text("not a folder\n")
    messages = {
        tmp_path
        / "missing": f"fairseq_ext: error: data folder {tmp_path / 'missing'} does not exist; give "
        "the folder fairseq-preprocess wrote (its --destdir)",
        tmp_path
        / "afile": f"fairseq_ext: error: data folder {tmp_path / 'afile'} is a file, not a folder; "
        "give the folder fairseq-preprocess wrote (its --destdir)",
    }
    if task != "prophetnet_denoising":  # which names its own fix for an empty folder
        messages[empty] = (
            f"fairseq_ext: error: {empty} holds no binarized pair (train.SRC-TGT.SRC.idx) to infer "
            "the languages from: give -s and -t, the languages fairseq-preprocess binarized"
        )
    for folder, message in messages.items():
        proc = run(
            [
                "fairseq-train",
                folder,
                "--user-dir",
                USER_DIR,
                "--task",
                task,
                "--arch",
                arch,
                "--criterion",
                criterion,
                "--max-tokens",
                "100",
                "--save-dir",
                tmp_path / "ck",
            ],
            check=False,
        )
        assert proc.returncode != 0 and "Traceback" not in proc.stderr
        assert message in proc.stderr.splitlines(), proc.stderr[-2000:]
        assert not any(
            (tmp_path / "ck").glob("*")
        )  # fairseq makes the save dir first; nothing is written


def _quickstart(command, *extra):
    """``command`` on the shipped model, its folder as the data folder (it holds the
    dictionaries)."""
    return [
        command,
        MODEL,
        "--user-dir",
        USER_DIR,
        "--task",
        "cmlm_hybrid",
        "-s",
        "en",
        "-t",
        "de",
        *extra,
    ]


def _one_line(proc, expected):
    """A non-zero exit, no traceback and exactly one error line: ``expected`` (a str, or a compiled
    pattern it matches), before any model was loaded."""
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("fairseq_ext: error:")]
    assert len(errors) == 1, proc.stderr[-2000:]
    assert (
        re.fullmatch(expected, errors[0])
        if isinstance(expected, re.Pattern)
        else errors[0] == expected
    )
    assert "loading model" not in proc.stderr and "H-" not in proc.stdout


def test_missing_checkpoint_is_named_with_the_checkpoints_beside_it(tmp_path):
    """A missing ``--path`` (alone, or a ``:``-separated part of an ensemble); before: fairseq's
    ``OSError: Model file not found`` traceback, after it had made ``--results-path``."""
    missing = MODEL / "checkpoint_best.pt"
    for path in (missing, f"{MODEL / 'checkpoint.pt'}:{missing}"):
        proc = run(
            _quickstart("fairseq-generate", "--path", path, "--results-path", tmp_path / "results"),
            check=False,
        )
        _one_line(
            proc,
            f"fairseq_ext: error: checkpoint {missing} does not exist; {MODEL} holds "
            f"checkpoint.pt, "
            "teacher.pt: give --path one of them, or a checkpoint file fairseq-train wrote",
        )
    assert not (tmp_path / "results").exists()


def test_missing_interactive_input_is_one_line_before_the_model_loads(tmp_path):
    missing = tmp_path / "inter" / "nonexistent.txt"
    proc = run(
        _quickstart("fairseq-interactive", "--path", MODEL / "checkpoint.pt", "--input", missing),
        check=False,
    )
    _one_line(
        proc,
        f"fairseq_ext: error: --input {missing} does not exist (nor does its folder "
        f"{missing.parent}); "
        "give the text file to translate, or - for standard input",
    )


def test_results_path_on_a_read_only_mount_is_one_line(tmp_path):
    """The mount itself and a folder to make on it; before: ``OSError: [Errno 30]`` from
    ``os.makedirs``."""
    with tmpfs(tmp_path / "ro", 1024, read_only=True) as ro:
        for results in (ro / "results", ro):
            proc = run(
                _quickstart(
                    "fairseq-generate", "--path", MODEL / "checkpoint.pt", "--results-path", results
                ),
                check=False,
            )
            _one_line(
                proc,
                f"fairseq_ext: error: cannot write results to --results-path {results}: Read-only "
                f"file "
                "system. Give a --results-path on a writable filesystem that you may create files "
                "in (or "
                "make this one writable), and run again",
            )
        assert os.listdir(ro) == []


def test_results_path_that_is_a_file_is_one_line(tmp_path):
    """``--results-path x/afile`` where ``x/afile`` is a file, and a folder to make under it;
    before: ``FileExistsError``. The file is left as it was."""
    afile = tmp_path / "x" / "afile"
    afile.parent.mkdir()
    afile.write_text("notes\n")
    expected = {
        afile: f"--results-path {afile} is a file, not a folder",
        afile
        / "sub": f"--results-path {afile / 'sub'} cannot be made: {afile} is a file, not a folder",
    }
    for results, wrong in expected.items():
        proc = run(
            _quickstart(
                "fairseq-generate", "--path", MODEL / "checkpoint.pt", "--results-path", results
            ),
            check=False,
        )
        _one_line(
            proc,
            f"fairseq_ext: error: {wrong}; give --results-path a folder (new or existing) for the "
            f"results",
        )
    assert os.listdir(afile.parent) == ["afile"] and afile.read_text() == "notes\n"


def test_dictionary_cut_by_a_full_disk_is_named(tmp_path):
    """fairseq-preprocess on a 48 KiB tmpfs runs out of space while it writes the 76 KB dictionary
    (``OSError: [Errno 28]``), leaving ``dict.en.txt`` cut mid-line; fairseq-generate on that folder
    stopped with ``ValueError: Incorrect dictionary format ...`` and said nothing of the cut
    file."""
    spm = tmp_path / "spm"
    spm.mkdir()
    for lang in ("en", "de"):
        text = (ROOT / "examples" / "quickstart" / "data" / f"test.{lang}").read_text(
            encoding="utf-8"
        )
        encoded = run(
            [
                sys.executable,
                ROOT / "data_prep" / "spm.py",
                "encode",
                "--model",
                MODEL / "spm.model",
            ],
            input=text,
        ).stdout
        (spm / f"test.{lang}").write_text(encoded, encoding="utf-8")
    with tmpfs(tmp_path / "disk", 48) as disk:
        data = disk / "bin"
        proc = run(
            [
                "fairseq-preprocess",
                "-s",
                "en",
                "-t",
                "de",
                "--testpref",
                spm / "test",
                "--srcdict",
                MODEL / "dict.en.txt",
                "--joined-dictionary",
                "--destdir",
                data,
                "--workers",
                "1",
            ],
            check=False,
        )
        assert proc.returncode != 0 and "No space left on device" in proc.stderr
        cut = data / "dict.en.txt"
        assert 0 < cut.stat().st_size < (MODEL / "dict.en.txt").stat().st_size
        proc = run(
            [
                "fairseq-generate",
                data,
                *_quickstart("fairseq-generate")[2:],
                "--path",
                MODEL / "checkpoint.pt",
            ],
            check=False,
        )
        _one_line(
            proc,
            re.compile(
                f"fairseq_ext: error: dictionary {re.escape(str(cut))} is cut short: its last "
                f"line, line \\d+ '[^']*'"
                r"( \(no count\))?, ends without a newline, as when fairseq-preprocess runs out of "
                r"disk "
                r"space while writing it\. Check the free disk space \(df -h\), then run "
                r"fairseq-preprocess again into an empty "
                r"--destdir"
            ),
        )


def test_missing_or_unreadable_sentencepiece_model_is_one_line(tmp_path):
    """``--bpe sentencepiece --sentencepiece-model PATH``: missing, a folder, or a file the user may
    not read (as root: run without root's override); before: sentencepiece's ``OSError: file ...
    not found`` after the model was loaded."""
    unreadable = tmp_path / "spm.model"
    shutil.copyfile(MODEL / "spm.model", unreadable)
    unreadable.chmod(0o000)
    fix = (
        "give the spm.model the data was encoded with (data_prep/spm.py train writes PREFIX.model)"
    )
    cases = {
        tmp_path / "missing.model": "does not exist;",
        tmp_path: "is a folder, not a file;",
        unreadable: "cannot be read: Permission denied; make it readable (chmod a+r), or",
    }
    for model, wrong in cases.items():
        cmd = _quickstart(
            "fairseq-interactive",
            "--path",
            MODEL / "checkpoint.pt",
            "--bpe",
            "sentencepiece",
            "--sentencepiece-model",
            model,
        )
        proc = run(
            as_unprivileged(cmd) if model == unreadable else cmd, check=False, input="A man.\n"
        )
        _one_line(proc, f"fairseq_ext: error: --sentencepiece-model {model} {wrong} {fix}")

"""Bad input as the command line meets it: a wrong ``--user-dir`` (fairseq imports it before
any plugin code runs; ``examples/`` answers for itself); a corrupt or foreign
``checkpoint_last.pt`` in the save dir of a run that resumes (one clear line, a non-zero exit,
and the save dir left as it was); a checkpoint of another family, a decoding option out of range
and an incomplete ``.bin`` at generation."""
import os
import shutil

import pytest
import torch

from fairseq_ext.checkpoints import safe_load
from tests.conftest import ROOT, TINY_DIMS, USER_DIR, generate_args, run, train_args


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
    for command in (train_args(tiny_data, tmp_path / "ck"), generate_args(tiny_data, tmp_path / "ck.pt")):
        proc = run(_with_user_dir(command, ROOT / "examples"), check=False, fresh=True)
        assert proc.returncode == 1
        assert proc.stderr.splitlines()[-1] == (
            f"fairseq_ext: error: --user-dir {ROOT / 'examples'} holds no fairseq plugin: it registers no task, model "
            f"or criterion (so --task would be refused as an invalid choice); the plugin is {USER_DIR}: give "
            f"--user-dir {USER_DIR}")
        assert "Traceback" not in proc.stderr and "argument --task: invalid choice" not in proc.stderr
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


@pytest.mark.parametrize("spoil, message", [
    (_truncated, "cannot read checkpoint"),
    (_foreign, "refusing to load"),
])
def test_bad_checkpoint_last_in_save_dir_is_refused_and_left_alone(tiny_data, tiny_checkpoint, tmp_path, spoil,
                                                                   message):
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
    assert f"fairseq_ext: error: {message}" in proc.stderr and str(save / "checkpoint_last.pt") in proc.stderr
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
    run(["fairseq-train", tiny_data, "--task", "translation", "-s", "en", "-t", "de", "--arch", "transformer",
         *TINY_DIMS, "--optimizer", "adam", "--lr", "5e-4", "--max-tokens", "2000", "--max-update", "1",
         "--save-dir", save, "--no-progress-bar", "--num-workers", "0", "--disable-validation", "--no-epoch-checkpoints"])
    return save / "checkpoint_last.pt"


def test_autoregressive_checkpoint_for_mask_predict_is_named(tiny_data, transformer_checkpoint):
    """Without the check fairseq stops in mask-predict with "'TransformerModel' object has no
    attribute 'forward_encoder'"."""
    proc = run(generate_args(tiny_data, transformer_checkpoint), check=False)
    _refused(proc, "--path: the checkpoint holds a TransformerModel, but --task cmlm_hybrid decodes with "
                   "mask-predict")
    assert "--task translation" in proc.stderr


def test_out_of_range_decoding_option_is_refused_not_clamped(tiny_data, tiny_checkpoint):
    """fairseq's generator decodes --iter-decode-with-beam -2 with one length candidate."""
    proc = run(generate_args(tiny_data, tiny_checkpoint, "--iter-decode-with-beam", "-2"), check=False)
    _refused(proc, "--iter-decode-with-beam must be >= 1 (the number of length candidates per sentence), got -2")
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
    _refused(proc, f"{binary} has {full // 2} bytes but {data / 'test.en-de.en.idx'} indexes {full}")


@pytest.mark.parametrize("task, arch, criterion", [
    ("cmlm_hybrid", "hi_cmlm_transformer_tiny", "nat_loss"),
    ("translation_prophetnet", "prophetnet_tiny", "ngram_language_loss"),
    ("unilm_seq2seq", "unilm_transformer_tiny", "label_smoothed_cross_entropy"),
    ("prophetnet_denoising", "prophetnet_tiny", "ngram_language_loss"),
])
def test_missing_or_unnamed_data_folder_is_one_line(task, arch, criterion, tmp_path):
    """A data folder that does not exist, and (translation-style tasks) one with no binarized
    pair to infer -s/-t from: fairseq stopped with a bare FileNotFoundError or Exception."""
    empty = tmp_path / "empty"
    empty.mkdir()
    messages = {tmp_path / "missing": f"fairseq_ext: error: data folder {tmp_path / 'missing'} does not exist: give "
                                      "the folder fairseq-preprocess wrote (its --destdir)"}
    if task != "prophetnet_denoising":  # which names its own fix for an empty folder
        messages[empty] = (f"fairseq_ext: error: {empty} holds no binarized pair (train.SRC-TGT.SRC.idx) to infer "
                           "the languages from: give -s and -t, the languages fairseq-preprocess binarized")
    for folder, message in messages.items():
        proc = run(["fairseq-train", folder, "--user-dir", USER_DIR, "--task", task, "--arch", arch, "--criterion",
                    criterion, "--max-tokens", "100", "--save-dir", tmp_path / "ck"], check=False)
        assert proc.returncode != 0 and "Traceback" not in proc.stderr
        assert message in proc.stderr.splitlines(), proc.stderr[-2000:]
        assert not any((tmp_path / "ck").glob("*"))  # fairseq makes the save dir first; nothing is written

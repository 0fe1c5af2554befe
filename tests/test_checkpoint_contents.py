"""What a checkpoint must hold before a model is built from it, through the real CLIs and in
process: the dictionaries it was trained with (a same-size dictionary in another order is
refused at generate, fine-tune and resume; a checkpoint without the record still loads),
finite weights and finite scores, ``--model-overrides`` it knows, a task of its family, and
the structure of a fairseq checkpoint at all (``{}``, a bare state dict)."""

import shutil

import pytest
import torch
from fairseq import checkpoint_utils
from fairseq.dataclass.configs import GenerationConfig

from fairseq_ext.checkpoints.checks import check_dictionaries, check_task_family
from fairseq_ext.checkpoints.dictionaries import RECORD_KEY
from fairseq_ext.common.errors import FairseqExtError
from tests.conftest import TINY_DIMS, USER_DIR, generate_args, run, train_args
from tests.helpers.families import build, dict_folder


def _one_line_error(proc, message):
    assert proc.returncode != 0
    assert f"fairseq_ext: error: {message}" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert "\nH-" not in "\n" + proc.stdout


# ------------------------------------------------------------------------------ dictionaries


@pytest.fixture(scope="module")
def reordered_data(tiny_data, tmp_path_factory):
    """The tiny data binarized again with its own dictionary, two entries swapped: the same
    400 entries, so every embedding shape matches."""
    out = tmp_path_factory.mktemp("reordered")
    lines = (tiny_data / "dict.en.txt").read_text(encoding="utf-8").splitlines()
    lines[3], lines[4] = lines[4], lines[3]
    (out / "dict.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    raw = tiny_data.parent / "raw"
    run(
        [
            "fairseq-preprocess",
            "-s",
            "en",
            "-t",
            "de",
            "--trainpref",
            raw / "train",
            "--validpref",
            raw / "valid",
            "--testpref",
            raw / "test",
            "--srcdict",
            out / "dict.txt",
            "--joined-dictionary",
            "--destdir",
            out / "bin",
            "--workers",
            "1",
        ]
    )
    return out / "bin"


REORDERED = (
    "dictionary mismatch: the source dictionary of the data is not the one {ckpt} was trained with "
    "(the same 400 entries in another order: entry 7 is {a!r} in the checkpoint's, {b!r} in the "
    "data's; entry 8 is {b!r} in the checkpoint's, {a!r} in the data's)"
)


def _swapped(tiny_data):
    lines = (tiny_data / "dict.en.txt").read_text(encoding="utf-8").splitlines()
    return lines[3].split()[0], lines[4].split()[0]


def test_checkpoint_records_the_dictionaries_in_order(tiny_data, tiny_checkpoint):
    """The task's ``state_dict()`` records them: fairseq saves it as ``task_state``."""
    state = torch.load(tiny_checkpoint, map_location="cpu", weights_only=True)
    recorded = state["task_state"][RECORD_KEY]
    symbols = [
        line.split()[0]
        for line in (tiny_data / "dict.en.txt").read_text(encoding="utf-8").splitlines()
    ]
    assert recorded["source"] == ["<s>", "<pad>", "</s>", "<unk>", *symbols]
    assert recorded["target"] == recorded["source"]  # --joined-dictionary
    assert RECORD_KEY not in state


def test_reordered_dictionary_is_refused_at_generate_finetune_and_resume(
    tiny_data, tiny_checkpoint, reordered_data, tmp_path
):
    a, b = _swapped(tiny_data)
    expected = REORDERED.format(ckpt=tiny_checkpoint, a=a, b=b)
    _one_line_error(run(generate_args(reordered_data, tiny_checkpoint), check=False), expected)
    before = tiny_checkpoint.read_bytes()
    finetune = run(
        train_args(reordered_data, tmp_path / "ft", "--finetune-from-model", tiny_checkpoint),
        check=False,
    )
    _one_line_error(finetune, expected)
    resume_dir = tmp_path / "resume"
    resume_dir.mkdir()
    shutil.copyfile(tiny_checkpoint, resume_dir / "checkpoint_last.pt")
    resumed = run(train_args(reordered_data, resume_dir, updates=6), check=False)
    _one_line_error(
        resumed, expected.replace(str(tiny_checkpoint), str(resume_dir / "checkpoint_last.pt"))
    )
    assert tiny_checkpoint.read_bytes() == before
    assert sorted(p.name for p in resume_dir.iterdir()) == ["checkpoint_last.pt"]
    assert not (tmp_path / "ft").exists() or not any((tmp_path / "ft").glob("*.pt"))


def test_checkpoint_without_the_record_still_loads_and_decodes_the_same(
    tiny_data, tiny_checkpoint, tmp_path
):
    """Checkpoints saved before the record existed keep fairseq's shape check only."""
    state = torch.load(tiny_checkpoint, map_location="cpu", weights_only=True)
    del state["task_state"][RECORD_KEY]
    old = tmp_path / "old.pt"
    torch.save(state, old)
    with_record = run(generate_args(tiny_data, tiny_checkpoint, "--iter-decode-max-iter", "2"))
    without = run(generate_args(tiny_data, old, "--iter-decode-max-iter", "2"))
    hyps = [line for line in with_record.stdout.splitlines() if line.startswith("H-")]
    assert len(hyps) == 21
    assert hyps == [line for line in without.stdout.splitlines() if line.startswith("H-")]
    assert "fairseq_ext: " not in without.stderr


def _state(task_name, recorded, **task_cfg):
    return {
        "cfg": {
            "task": {"_name": task_name, "data": "data-bin/x", **task_cfg},
            "model": {"_name": "m"},
        },
        RECORD_KEY: recorded,
        "model": {},
    }


class _Task:
    def __init__(self, source, target, **cfg):
        self.source_dictionary = type("D", (), {"symbols": source})()
        self.target_dictionary = type("D", (), {"symbols": target})()
        self.cfg = type("C", (), cfg)()


@pytest.mark.parametrize(
    "checkpoint, data, expected",
    [
        (
            ["a", "b", "c"],
            ["a", "c", "b"],
            "(the same 3 entries in another order: entry 1 is 'b' in the checkpoint's, "
            "'c' in the data's; entry 2 is 'c' in the checkpoint's, 'b' in the data's)",
        ),
        (
            ["a", "b", "c"],
            ["a", "b"],
            "(3 entries in ck.pt's, 2 in the data's: entry 2 is 'c' in the checkpoint's, "
            "nothing in the data's)",
        ),
    ],
)
def test_dictionary_mismatch_names_the_side_and_the_first_differences(checkpoint, data, expected):
    with pytest.raises(FairseqExtError) as caught:
        check_dictionaries(
            "ck.pt",
            _state("cmlm_hybrid", {"source": ["x"], "target": checkpoint}),
            _Task(["x"], data),
            "cmlm_hybrid",
        )
    assert str(caught.value).startswith(
        "dictionary mismatch: the target dictionary of the data is not the one ck.pt "
        f"was trained with {expected}; binarize the data with the checkpoint's "
        "dictionary (fairseq-preprocess --srcdict DICT [--tgtdict DICT])"
    )
    assert str(caught.value).endswith("; it was trained on data-bin/x")


def test_keep_tokens_and_other_tasks_targets():
    """A pruned checkpoint names --keep-tokens; a task of another family (sentence_prediction
    fine-tuning a position_masked_lm encoder) compares the source side only."""
    with pytest.raises(
        FairseqExtError, match="with --keep-tokens keep.txt: give the same --keep-tokens FILE"
    ):
        check_dictionaries(
            "ck.pt",
            _state("unilm_seq2seq", {"source": ["a"]}, keep_tokens="keep.txt"),
            _Task(["a", "b"], ["a", "b"], keep_tokens=None),
            "unilm_seq2seq",
        )
    labels = _Task(["a", "b"], ["0", "1"])
    check_dictionaries(
        "ck.pt",
        _state("position_masked_lm", {"source": ["a", "b"], "target": ["a", "b"]}),
        labels,
        "sentence_prediction",
    )
    with pytest.raises(FairseqExtError, match="the source dictionary"):
        check_dictionaries(
            "ck.pt",
            _state("position_masked_lm", {"source": ["b", "a"]}),
            labels,
            "sentence_prediction",
        )


# ---------------------------------------------------------------------------- task family


@pytest.mark.parametrize(
    "trained, used, refused",
    [
        ("translation_prophetnet", "cmlm_hybrid", True),
        ("cmlm_hybrid", "unilm_seq2seq", True),
        ("position_masked_lm", "permutation_lm", True),
        ("prophetnet_denoising", "translation_prophetnet", False),  # pre-training -> fine-tuning
        ("permutation_lm", "unilm_seq2seq", False),
        ("position_masked_lm", "sentence_prediction", False),  # fairseq's own fine-tuning task
    ],
)
def test_task_family(trained, used, refused):
    state = _state(trained, {})
    if refused:
        with pytest.raises(
            FairseqExtError,
            match=f"ck.pt was trained with --task {trained} .*--task {used} cannot "
            f"use it. Give --task {trained}",
        ):
            check_task_family("ck.pt", state, used)
    else:
        check_task_family("ck.pt", state, used)


def test_mask_predict_checkpoint_without_task_names_fairseqs_default(tiny_data, tiny_checkpoint):
    """No --task: fairseq-generate's default, translation, which the user never gave (before: a
    TypeError traceback from the model's forward)."""
    args = generate_args(tiny_data, tiny_checkpoint)
    i = args.index("--task")
    proc = run(args[:i] + args[i + 2 :], check=False)
    _one_line_error(
        proc,
        f"{tiny_checkpoint} was trained with --task cmlm_hybrid (--arch hi_cmlm_transformer_tiny); "
        "--task translation (fairseq's default when no --task is given) decodes autoregressively "
        "and cannot use it. Give --task cmlm_hybrid",
    )


def test_prophetnet_checkpoint_for_cmlm_hybrid_names_the_task(tiny_data, tmp_path):
    """Before: 'dictionary mismatch ... has 401 entries but ... 400' (ProphetNet adds <mask>),
    which sent the user to binarize the data again."""
    run(
        [
            "fairseq-train",
            tiny_data,
            "--user-dir",
            USER_DIR,
            "--task",
            "translation_prophetnet",
            "-s",
            "en",
            "-t",
            "de",
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
            "--max-update",
            "1",
            "--save-dir",
            tmp_path,
            "--no-progress-bar",
            "--num-workers",
            "0",
            "--disable-validation",
            "--no-epoch-checkpoints",
        ]
    )
    proc = run(generate_args(tiny_data, tmp_path / "checkpoint_last.pt"), check=False)
    _one_line_error(
        proc,
        f"{tmp_path / 'checkpoint_last.pt'} was trained with --task translation_prophetnet (--arch "
        "prophetnet_tiny); --task cmlm_hybrid cannot use it. Give --task translation_prophetnet",
    )


# ------------------------------------------------------------------- not a checkpoint at all


@pytest.mark.parametrize(
    "content, described",
    [
        ({}, "an empty dict"),
        ("bare", "a bare state dict of"),
        ({"weights": [1, 2]}, "a dict with the keys ['weights']"),
    ],
)
def test_file_that_is_not_a_fairseq_checkpoint_is_named(
    tiny_data, tiny_checkpoint, tmp_path, content, described
):
    if content == "bare":
        content = torch.load(tiny_checkpoint, map_location="cpu", weights_only=True)["model"]
    path = tmp_path / "not_a_checkpoint.pt"
    torch.save(content, path)
    expected = f"{path} is not a fairseq checkpoint: it holds {described}"
    with pytest.raises(FairseqExtError, match="is not a fairseq checkpoint"):
        checkpoint_utils.load_checkpoint_to_cpu(str(path))
    _one_line_error(run(generate_args(tiny_data, path), check=False), expected)
    if content == {}:
        _one_line_error(
            run(train_args(tiny_data, tmp_path / "ck", "--restore-file", path), check=False),
            expected,
        )


# ------------------------------------------------------------------------ non-finite values


@pytest.mark.parametrize("value", [float("inf"), float("nan")])
def test_non_finite_weight_is_refused_naming_the_tensor(
    tiny_data, tiny_checkpoint, tmp_path, value
):
    state = torch.load(tiny_checkpoint, map_location="cpu", weights_only=True)
    name = "decoder.layers.0.fc2.weight"
    state["model"][name].view(-1)[7] = value
    path = tmp_path / "bad.pt"
    torch.save(state, path)
    _one_line_error(
        run(generate_args(tiny_data, path), check=False),
        f"refusing to load {path}: {name} holds 1 non-finite value(s) (NaN or Inf) of 2048",
    )


@pytest.mark.parametrize("family", ["hi_cmlm", "unilm"])
def test_non_finite_scores_stop_decoding(tmp_path, family):
    """A model whose outputs are NaN (the load check bypassed): the generator stops with one
    line instead of finalizing empty hypotheses scored 0 (mask-predict) or failing on an
    assert (beam search)."""
    task, model, _ = build(dict_folder(tmp_path, 30), family)
    model.eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed_tokens" in name:
                p.fill_(float("nan"))
    generator = task.build_generator([model], GenerationConfig(beam=2, max_len_b=5))
    eos = task.source_dictionary.eos()
    src = torch.tensor([[10, 11, 12, eos], [13, 14, 15, eos]])
    sample = {
        "id": torch.tensor([4, 9]),
        "net_input": {"src_tokens": src, "src_lengths": torch.tensor([4, 4])},
    }
    with pytest.raises(
        FairseqExtError,
        match=r"decoding the batch of sentence ids 4, 9 gave non-finite .* \(NaN or Inf\)",
    ):
        task.inference_step(generator, [model], sample)


# ----------------------------------------------------------------------- --model-overrides


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            "{'hybrid_stratgy': 'all_mask'}",
            "--model-overrides: 'hybrid_stratgy' is not an option of {ckpt} "
            "(did you mean 'hybrid_strategy'?)",
        ),
        (
            "{'hybrid_strategy': 'bogus'}",
            "--model-overrides: hybrid_strategy must be one of all_mask, all_copied, "
            "weighted_sum, fence_replace, got 'bogus'",
        ),
        (
            "{'decoder_layers': 'two'}",
            "--model-overrides: decoder_layers must be an integer, got 'two'",
        ),
        (
            "{'copy_temperature': 1e999}",
            "--model-overrides: copy_temperature must be a finite number, got inf",
        ),
        (
            "{'ngram': 2}",
            "--model-overrides: 'ngram' is not an option of {ckpt}; keys are",
        ),  # no far-off guess
        (
            "{'copy_temperature': float('nan')}",
            "--model-overrides \"{{'copy_temperature': float('nan')}}\" is not a "
            "Python literal (ValueError); give a dict of plain values",
        ),
        (
            "['copy_temperature', 2]",
            "--model-overrides must be a dict, e.g. \"{{'iter_decode_max_iter': 4}}\"; got a list",
        ),
    ],
)
def test_model_overrides_are_checked_before_decoding(
    tiny_data, tiny_checkpoint, overrides, message
):
    proc = run(
        generate_args(tiny_data, tiny_checkpoint, "--model-overrides", overrides), check=False
    )
    _one_line_error(proc, message.format(ckpt=tiny_checkpoint))


def test_valid_model_override_is_applied(tiny_data, tiny_checkpoint):
    proc = run(
        generate_args(
            tiny_data,
            tiny_checkpoint,
            "--model-overrides",
            "{'hybrid_strategy': 'all_copied'}",
            "--iter-decode-max-iter",
            "1",
        )
    )
    assert proc.stdout.count("\nH-") + proc.stdout.startswith("H-") == 21
    state = checkpoint_utils.load_checkpoint_to_cpu(
        str(tiny_checkpoint), {"hybrid_strategy": "all_copied"}
    )
    assert state["cfg"]["model"].hybrid_strategy == "all_copied"

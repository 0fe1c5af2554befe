"""``--eval-rouge`` through the real fairseq CLIs: the validation ROUGE that fairseq-train logs
for ``unilm_seq2seq`` and ``translation_prophetnet`` equals ``python -m fairseq_ext.analysis.rouge``
on what fairseq-generate writes for the same checkpoint, split and decoding settings; fairseq's
early stopping on it stops a run whose ROUGE-1 cannot improve and keeps the best checkpoint;
bad ``--eval-rouge*`` input is one clear line; pieces become the text the scripts' own commands
make of them."""

import json
import re
import subprocess
import sys

import pytest

from fairseq_ext.checkpoints import safe_load
from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.tasks.rouge_validation import GIGAWORD_DECODING
from tests.conftest import ROOT, TINY_DIMS, USER_DIR, binarize, cli_env, read_sample, run

COMMON = [
    "--optimizer",
    "adam",
    "--lr",
    "5e-3",
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
MODELS = {
    "unilm_seq2seq": [
        "--arch",
        "unilm_transformer_tiny",
        "--attention-mask",
        "prefix",
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
        "--criterion",
        "label_smoothed_cross_entropy",
        "--label-smoothing",
        "0.1",
    ],
    "translation_prophetnet": [
        "--arch",
        "prophetnet_tiny",
        *TINY_DIMS,
        "--criterion",
        "ngram_language_loss",
        "--label-smoothing",
        "0.1",
    ],
}
# examples/*/gigaword.sh decode with these (GIGAWORD_DECODING, the default of --eval-rouge-args)
GENERATE = [
    "--beam",
    "4",
    "--lenpen",
    "1.0",
    "--no-repeat-ngram-size",
    "3",
    "--max-len-a",
    "0",
    "--max-len-b",
    "40",
    "--post-process",
    "sentencepiece",
]
BY_ROUGE1 = ["--best-checkpoint-metric", "rouge1", "--maximize-best-checkpoint-metric"]


@pytest.fixture(scope="module")
def headlines(spm_model, tmp_path_factory):
    """Headline pairs that a tiny model starts to get right within 40 updates (so that ROUGE-2
    is not 0): each sample sentence as article ("en") and its first five words as title ("de");
    400 training and 37 validation pairs, sentencepiece pieces as data_prep/gigaword.sh makes."""

    def pairs(split, n):
        articles = read_sample(split, "en", n)
        return articles, [" ".join(a.split()[:5]) for a in articles]

    return binarize(
        spm_model,
        tmp_path_factory.mktemp("headlines"),
        {"train": pairs("train", 400), "valid": pairs("valid", 37)},
    )


def train(data, save, task, *extra):
    return run(
        [
            "fairseq-train",
            data,
            "--user-dir",
            USER_DIR,
            "--task",
            task,
            "-s",
            "en",
            "-t",
            "de",
            *MODELS[task],
            *COMMON,
            "--save-dir",
            save,
            *extra,
        ]
    )


def validations(log: str) -> dict[int, dict[str, float]]:
    """fairseq-train's validation lines: ``{num_updates: {rouge1, rouge2, rougeL}}``."""
    out = {}
    for line in log.splitlines():
        if "valid on 'valid' subset" in line:
            fields = dict(re.findall(r"\| (\w+) ([-\d.e]+)", line))
            out[int(fields["num_updates"])] = {
                k: float(fields[k]) for k in ("rouge1", "rouge2", "rougeL")
            }
    return out


def updates_and_score(checkpoint) -> tuple[int, float]:
    """The update count of a checkpoint and the validation score fairseq saved with it
    (unrounded)."""
    state = safe_load(str(checkpoint))
    return state["optimizer_history"][-1]["num_updates"], state["extra_state"]["val_loss"]


def scored_by_generate(data, checkpoint, task, tmp_path) -> dict[str, float]:
    """fairseq-generate's hypotheses (D-) and decoded targets (T-) of the validation split, in
    the validation's batches (--max-tokens 2000), scored by the project's scorer's command line."""
    proc = run(
        [
            "fairseq-generate",
            data,
            "--user-dir",
            USER_DIR,
            "--task",
            task,
            "-s",
            "en",
            "-t",
            "de",
            "--path",
            checkpoint,
            "--gen-subset",
            "valid",
            "--max-tokens",
            "2000",
            *GENERATE,
        ]
    )
    lines = {}
    for kind in ("D", "T"):
        rows = sorted(
            (int(m.group(1)), m.group(2))
            for m in re.finditer(rf"^{kind}-(\d+)\t(?:\S+\t)?(.*)$", proc.stdout, re.M)
        )
        assert [i for i, _ in rows] == list(range(37))  # every validation pair
        lines[kind] = tmp_path / f"{checkpoint.stem}.{kind}"
        lines[kind].write_text("".join(text + "\n" for _, text in rows))
    out = tmp_path / f"{checkpoint.stem}.json"
    run(
        [
            sys.executable,
            "-m",
            "fairseq_ext.analysis.rouge",
            "--hyp",
            lines["D"],
            "--ref",
            lines["T"],
            "--json",
            out,
        ]
    )
    return json.loads(out.read_text())


@pytest.mark.parametrize("task", MODELS)
def test_logged_rouge_is_the_scorer_on_fairseq_generate(headlines, tmp_path, task):
    """40 updates, validated at 20 and 40 with the default --eval-rouge-args: the logged
    rouge1/2/L of checkpoint_best.pt and checkpoint_last.pt are the scorer's on fairseq-generate's
    output of that checkpoint (to the log's 6 digits; ROUGE-1 to 1e-6 as saved in the checkpoint),
    and the best checkpoint is the validation with the highest ROUGE-1 (of equal ones the later:
    fairseq's rule)."""
    save = tmp_path / "ckpt"
    proc = train(
        headlines,
        save,
        task,
        "--eval-rouge",
        "--max-update",
        "40",
        "--validate-interval-updates",
        "20",
        "--save-interval-updates",
        "20",
        "--validate-interval",
        "1000",
        "--save-interval",
        "1000",
        *BY_ROUGE1,
    )
    logged = validations(proc.stdout + proc.stderr)
    assert sorted(logged) == [20, 40]
    best_update = max(logged, key=lambda u: (logged[u]["rouge1"], u))
    for name, update in {"checkpoint_best.pt": best_update, "checkpoint_last.pt": 40}.items():
        saved_update, saved_rouge1 = updates_and_score(save / name)
        assert saved_update == update
        if name == "checkpoint_last.pt" and update == best_update:
            continue  # the same weights as checkpoint_best.pt, compared above
        reference = scored_by_generate(headlines, save / name, task, tmp_path)
        assert reference["sentences"] == 37
        assert saved_rouge1 == pytest.approx(reference["rouge1"], abs=1e-6)
        for key in ("rouge1", "rouge2", "rougeL"):
            assert logged[update][key] == pytest.approx(reference[key], rel=1e-5, abs=1e-9), key
    assert all(v["rouge2"] > 0 for v in logged.values())  # a comparison of more than zeros


def test_early_stopping_on_rouge1_keeps_the_best_checkpoint(headlines, tmp_path):
    """At learning rate 0 the model and so its ROUGE-1 never change: with --patience 1 and a
    validation every update, the second validation, not better than the first, stops training at
    update 2 of 10. checkpoint_best.pt holds the best ROUGE-1; of equal scores fairseq keeps the
    later checkpoint, here update 2."""
    save = tmp_path / "ckpt"
    proc = train(
        headlines,
        save,
        "unilm_seq2seq",
        "--eval-rouge",
        "--eval-rouge-args",
        '{"beam": 2, "max_len_b": 8}',
        "--lr",
        "0",
        "--max-update",
        "10",
        "--validate-interval-updates",
        "1",
        "--save-interval-updates",
        "1",
        "--keep-interval-updates",
        "1",
        "--patience",
        "1",
        *BY_ROUGE1,
    )
    log = proc.stdout + proc.stderr
    logged = validations(log)
    assert sorted(logged) == [1, 2] and logged[1] == logged[2]
    assert "early stop since valid performance hasn't improved for last 1 runs" in log
    assert updates_and_score(save / "checkpoint_best.pt") == (
        2,
        pytest.approx(logged[1]["rouge1"], rel=1e-5),
    )
    assert updates_and_score(save / "checkpoint_last.pt")[0] == 2
    assert logged[1]["rouge1"] > 0


def test_without_patience_training_runs_to_max_update(headlines, tmp_path):
    """The control of the test above: the same run without --patience trains all 4 updates."""
    proc = train(
        headlines,
        tmp_path,
        "unilm_seq2seq",
        "--eval-rouge",
        "--eval-rouge-args",
        '{"beam": 2, "max_len_b": 8}',
        "--lr",
        "0",
        "--max-update",
        "4",
        "--validate-interval-updates",
        "1",
        "--save-interval-updates",
        "1",
        "--keep-interval-updates",
        "1",
        *BY_ROUGE1,
    )
    assert sorted(validations(proc.stdout + proc.stderr)) == [1, 2, 3, 4]


@pytest.mark.parametrize(
    "options, message",
    [
        (
            ["--eval-rouge-args", "beam=4"],
            "--eval-rouge-args 'beam=4' is not JSON (Expecting value, character 1); "
            f"give a JSON object of decoding options, e.g. '{GIGAWORD_DECODING}'",
        ),
        (["--eval-rouge-args", "[4]"], "--eval-rouge-args '[4]' is not a JSON object"),
        (
            ["--eval-rouge-args", '{"beam_size": 4}'],
            "--eval-rouge-args: 'beam_size' is not a decoding option of beam "
            "search; the options are beam, lenpen,",
        ),
        (
            ["--eval-rouge-args", '{"beam": "4"}'],
            '--eval-rouge-args: beam must be a whole number, got "4"',
        ),
        (["--eval-rouge-args", '{"beam": 0}'], "--eval-rouge-args: --beam must be in [1, "),
        (
            ["--eval-rouge-detok", "wordpiece"],
            "--eval-rouge-detok wordpiece joins pieces with the checkpoint's "
            "tokenizer: give --eval-rouge-wordpiece-tokenizer DIR",
        ),
        (
            ["--eval-rouge-wordpiece-tokenizer", "DIR"],
            "--eval-rouge-wordpiece-tokenizer is for --eval-rouge-detok "
            "wordpiece, not sentencepiece",
        ),
        (
            ["--eval-rouge-detok", "wordpiece", "--eval-rouge-wordpiece-tokenizer", "MISSING"],
            "--eval-rouge-wordpiece-tokenizer MISSING is not a folder",
        ),
        (
            ["--eval-rouge-detok", "wordpiece", "--eval-rouge-wordpiece-tokenizer", "."],
            "--eval-rouge-detok wordpiece: no symbol of the target dictionary is a ## continuation "
            "piece",
        ),
    ],
    ids=[
        "not-json",
        "not-an-object",
        "unknown-option",
        "string-beam",
        "beam-0",
        "wordpiece-without-tokenizer",
        "tokenizer-without-wordpiece",
        "missing-tokenizer",
        "wordpiece-on-sentencepiece-data",
    ],
)
def test_bad_eval_rouge_input_is_one_line(tiny_data, tmp_path, options, message):
    proc = run(
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
            *MODELS["translation_prophetnet"],
            *COMMON,
            "--max-update",
            "1",
            "--save-dir",
            tmp_path / "ckpt",
            "--eval-rouge",
            *options,
        ],
        check=False,
        cwd=tmp_path,
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("fairseq_ext: error:")]
    assert len(errors) == 1 and errors[0].startswith(f"fairseq_ext: error: {message}"), proc.stderr[
        -2000:
    ]
    assert not (tmp_path / "ckpt").exists() or not any((tmp_path / "ckpt").iterdir())


def test_pieces_become_the_text_the_scripts_score(tmp_path):
    """PiecesToText against the scripts' own commands: WordPiece as
    examples/pretrained/minilm_gigaword.sh joins fairseq-generate's pieces (<unk> as [UNK],
    data_prep/wordpiece.py decode, [UNK] as UNK); sentencepiece as fairseq-generate
    --post-process sentencepiece prints them, with fairseq's <unk> the word UNK."""
    from fairseq.data import Dictionary

    from fairseq_ext.tasks.rouge_validation import PiecesToText

    pieces = [
        "police",
        "arrest",
        "##ed",
        "two",
        "[UNK]",
        "men",
        "in",
        "##side",
        ",",
        "it",
        "'",
        "s",
    ]
    (tmp_path / "vocab.txt").write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *pieces]) + "\n"
    )
    d = Dictionary()
    for p in pieces:
        d.add_symbol(p)
    lines = [
        ["police", "arrest", "##ed", "two", "<unk>", "men"],
        ["in", "##side", "[UNK]", ",", "it", "'", "s"],
    ]
    ids = [
        d.encode_line(" ".join(line).replace("<unk>", "NOT-IN-DICT"), add_if_not_exist=False)
        for line in lines
    ]
    assert d.unk() in ids[0].tolist()
    script = subprocess.run(
        [
            "bash",
            "-c",
            f"sed -E 's/<unk>/[UNK]/g' | {sys.executable} {ROOT}/data_prep/wordpiece.py decode "
            f"--tokenizer {tmp_path} | sed 's/\\[UNK\\]/UNK/g'",
        ],
        input="".join(d.string(i) + "\n" for i in ids),
        capture_output=True,
        text=True,
        env=cli_env(),
        check=True,
    )
    text = PiecesToText(d, "wordpiece", str(tmp_path))
    assert [text(i, {d.eos()}) for i in ids] == script.stdout.splitlines()
    assert script.stdout.splitlines()[0] == "police arrested two UNK men"

    s = Dictionary()
    for p in ["\u2581police", "\u2581arrest", "ed", "\u2581two", "\u2581UNK", "\u2581men"]:
        s.add_symbol(p)
    line = s.encode_line(
        "\u2581police \u2581arrest NOT-IN-DICT ed \u2581UNK \u2581two", add_if_not_exist=False
    )
    generate = s.string(line, "sentencepiece")  # fairseq-generate's D- line
    assert generate == "police arrest<unk>ed UNK two"
    assert PiecesToText(s, "sentencepiece", None)(line, {s.eos()}) == "police arrest UNK ed UNK two"
    assert (
        PiecesToText(s, "none", None)(line, {s.eos()})
        == "\u2581police \u2581arrest UNK ed \u2581UNK \u2581two"
    )
    with pytest.raises(
        FairseqExtError, match="no symbol of the target dictionary holds sentencepiece's word mark"
    ):
        PiecesToText(d, "sentencepiece", None)  # WordPiece data

"""Position masking through the real fairseq CLIs (subprocesses): pre-train with
position_masked_lm, validate every example, fine-tune with fairseq's sentence_prediction
and the straight-through attention dropout, plot the curves, and refuse bad input with one
line."""

import json
import re
import sys
from pathlib import Path

import pytest

from fairseq_ext.checkpoints import pickled_globals
from tests.conftest import ROOT, USER_DIR, encode, read_sample, run, write_lines

PLOT = ROOT / "reproduction" / "position_masking" / "plot.py"
DIMS = [
    "--encoder-layers",
    "1",
    "--encoder-embed-dim",
    "32",
    "--encoder-ffn-embed-dim",
    "64",
    "--encoder-attention-heads",
    "2",
]


def pretrain_args(data, save, *extra):
    return [
        "fairseq-train",
        data,
        "--user-dir",
        USER_DIR,
        "--task",
        "position_masked_lm",
        "--arch",
        "position_masked_roberta_tiny",
        *DIMS,
        "--criterion",
        "position_masked_lm",
        "--tokens-per-sample",
        "128",
        "--sample-break-mode",
        "eos",
        "--batch-size",
        "8",
        "--optimizer",
        "adam",
        "--lr",
        "1e-3",
        "--max-update",
        "6",
        "--log-interval",
        "2",
        "--log-format",
        "simple",
        "--no-progress-bar",
        "--num-workers",
        "0",
        "--seed",
        "1",
        "--save-dir",
        save,
        *extra,
    ]


@pytest.fixture(scope="module")
def pretrained(mono_data, tmp_path_factory):
    save = tmp_path_factory.mktemp("posmask_pretrain")
    proc = run(pretrain_args(mono_data, save, "--position-mask-prob", "0.2"))
    (save / "train.log").write_text(proc.stdout + proc.stderr)
    return save


def _valid_line(log: str) -> str:
    return [line for line in log.splitlines() if "| valid |" in line][-1]


def test_pretrain_validates_every_example_and_logs_both_accuracies(pretrained):
    valid = _valid_line((pretrained / "train.log").read_text())
    assert 37 % 8 != 0 and "| examples 37 |" in valid  # every validation line, none dropped
    for metric in ("mlm_loss", "mlm_accuracy", "position_loss", "position_accuracy"):
        assert re.search(rf"\| {metric} [\d.]+ ", valid), metric
    assert pickled_globals(str(pretrained / "checkpoint_last.pt")) == ["argparse.Namespace"]


def test_plot_draws_both_curves_and_reports_the_last_validation(pretrained, tmp_path):
    log = (pretrained / "train.log").read_text()
    run([sys.executable, PLOT, "--out", tmp_path, f"0.2={pretrained}"])
    for png in ("mlm_accuracy.png", "position_accuracy.png"):
        assert (tmp_path / png).stat().st_size > 5000
    row = json.loads((tmp_path / "results.json").read_text())[0]
    valid = _valid_line(log)
    assert row["valid_mlm_accuracy"] == float(
        re.search(r"\| mlm_accuracy ([\d.]+)", valid).group(1)
    )
    assert row["valid_position_accuracy"] == float(
        re.search(r"\| position_accuracy ([\d.]+)", valid).group(1)
    )
    assert row["updates"] == 6


def _classification_data(spm_model, mono_data, out: Path) -> Path:
    """A small two-class set (does the caption mention a man?) for sentence_prediction."""
    lines = read_sample("train", "en")[600:800]
    for split, part in (("train", lines[:160]), ("valid", lines[160:])):
        write_lines(out / f"{split}.raw", part)
        encode(spm_model, out / f"{split}.raw", out / f"{split}.input0")
        write_lines(
            out / f"{split}.label",
            ["man" if " man " in f" {s.lower()} " else "other" for s in part],
        )
    run(
        [
            "fairseq-preprocess",
            "--only-source",
            "--trainpref",
            out / "train.input0",
            "--validpref",
            out / "valid.input0",
            "--srcdict",
            mono_data / "dict.txt",
            "--destdir",
            out / "bin" / "input0",
            "--workers",
            "1",
        ]
    )
    run(
        [
            "fairseq-preprocess",
            "--only-source",
            "--trainpref",
            out / "train.label",
            "--validpref",
            out / "valid.label",
            "--destdir",
            out / "bin" / "label",
            "--workers",
            "1",
        ]
    )
    return out / "bin"


@pytest.fixture(scope="module")
def finetuned(spm_model, mono_data, pretrained, tmp_path_factory):
    """A save dir of a short sentence_prediction fine-tuning of ``pretrained``, with its
    train.log."""
    out = tmp_path_factory.mktemp("posmask_finetune")
    data = _classification_data(spm_model, mono_data, out)
    proc = run(
        [
            "fairseq-train",
            data,
            "--user-dir",
            USER_DIR,
            "--task",
            "sentence_prediction",
            "--num-classes",
            "2",
            "--max-positions",
            "128",
            "--arch",
            "position_masked_roberta_tiny",
            *DIMS,
            "--criterion",
            "sentence_prediction",
            "--restore-file",
            pretrained / "checkpoint_last.pt",
            "--reset-optimizer",
            "--reset-dataloader",
            "--reset-meters",
            "--attention-dropout-straight-through",
            "--optimizer",
            "adam",
            "--lr",
            "1e-4",
            "--batch-size",
            "16",
            "--max-update",
            "4",
            "--log-format",
            "simple",
            "--log-interval",
            "2",
            "--no-progress-bar",
            "--num-workers",
            "0",
            "--save-dir",
            out / "ft",
        ]
    )
    (out / "ft" / "train.log").write_text(proc.stdout + proc.stderr)
    return out / "ft"


def test_finetune_with_sentence_prediction_drops_the_position_head(finetuned):
    log = (finetuned / "train.log").read_text()
    assert "dropped the pre-training position head of the checkpoint" in log
    assert "encoder.position_classifier.weight" in log
    assert "1 attention modules drop their weights with the straight-through gradient" in log
    assert re.search(r"\| valid \|.*\| accuracy [\d.]+", log)


def test_plot_reports_the_downstream_accuracy_of_each_fine_tuned_checkpoint(
    pretrained, finetuned, tmp_path
):
    run(
        [
            sys.executable,
            PLOT,
            "--out",
            tmp_path,
            f"0.2={pretrained}",
            "--finetune",
            f"0.2={finetuned}",
            "--finetune",
            f"none={finetuned / 'train.log'}",
        ]
    )
    assert (tmp_path / "downstream_accuracy.png").stat().st_size > 5000
    rows = {r["position_mask_prob"]: r for r in json.loads((tmp_path / "results.json").read_text())}
    valid = _valid_line((finetuned / "train.log").read_text())
    accuracy = float(re.search(r"\| accuracy ([\d.]+)", valid).group(1))
    assert (
        rows["0.2"]["downstream_valid_accuracy"] == accuracy
        and rows["0.2"]["finetune_updates"] == 4
    )
    assert (
        rows["none"]["downstream_valid_accuracy"] == accuracy
        and rows["none"]["valid_mlm_accuracy"] is None
    )
    assert "downstream valid accuracy" in (tmp_path / "results.md").read_text()
    proc = run(
        [
            sys.executable,
            PLOT,
            "--out",
            tmp_path,
            f"0.2={pretrained}",
            "--finetune",
            f"0.3={finetuned}",
        ],
        check=False,
    )
    assert proc.returncode != 0 and "--finetune ['0.3'] name no pre-training run" in proc.stderr


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--position-mask-prob", "1.5"], r"--position-mask-prob must be in \[0, 1\], got 1.5"),
        (
            ["--max-positions", "32"],
            r"--tokens-per-sample 128 is more than the 32 classes of the position classifier",
        ),
    ],
)
def test_bad_input_is_one_line(mono_data, tmp_path, extra, message):
    proc = run(pretrain_args(mono_data, tmp_path, *extra), check=False)
    assert proc.returncode == 1
    assert re.search("fairseq_ext: error: " + message, proc.stderr)
    assert "Traceback" not in proc.stderr


def test_wikitext2_prep_splits_by_article(tmp_path):
    """data_prep/wikitext2.sh --local FILE: the last tenth of the articles is valid."""
    text = []
    for a in range(20):
        text += ["", f" = Article {a} = ", ""]
        text += [f" the article number {a} says word{a % 7} and more text {i} ." for i in range(6)]
    corpus = tmp_path / "wiki.raw"
    write_lines(corpus, text)
    proc = run(
        [
            "bash",
            ROOT / "data_prep" / "wikitext2.sh",
            "--local",
            corpus,
            "--out",
            tmp_path / "out",
            "--vocab",
            "38",
        ]
    )
    assert "18 articles train, 2 valid" in proc.stderr
    assert "dropped 40 blank or whitespace-only lines" in proc.stderr  # printed, not silent
    train = (tmp_path / "out" / "raw" / "train.txt").read_text().splitlines()
    valid = (tmp_path / "out" / "raw" / "valid.txt").read_text().splitlines()
    assert [line for line in valid if line.startswith(" = ")] == [
        " = Article 18 = ",
        " = Article 19 = ",
    ]
    assert sum(line.startswith(" = ") for line in train) == 18 and "" not in train + valid
    assert len(train) == 18 * 7 and len(valid) == 2 * 7
    for f in ("dict.txt", "train.bin", "valid.bin"):
        assert (tmp_path / "out" / "bin" / f).exists()


def _data_prep_script(name: str):
    """A data_prep script as a module; its folder goes on sys.path as when it runs as a script
    (the scripts import their shared helper module from there)."""
    import importlib.util

    folder = str(ROOT / "data_prep")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, ROOT / "data_prep" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_headline_match_pairs_are_balanced_and_never_pair_an_article_with_its_title():
    module = _data_prep_script("headline_match")
    articles = [f"article {i}" for i in range(50)] + [""]
    titles = [f"title {i % 45}" for i in range(50)] + ["orphan"]
    rows = module.pairs(articles, titles, seed=3)
    assert len(rows) == 100 and rows == module.pairs(articles, titles, seed=3)
    for k in range(0, 100, 2):
        (a, t, y), (a2, t2, y2) = rows[k], rows[k + 1]
        i = int(a.split()[1])
        assert (y, y2) == ("match", "other") and a == a2 and t == titles[i] and t2 != titles[i]
    assert len({t2 for _, t2, y in rows if y == "other"}) > 10


def test_word_order_shuffles_one_span_and_keeps_the_words():
    module = _data_prep_script("word_order")
    lines = [
        " = Heading = ",
        " one two three four five six seven eight . nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen . short one .",
        " a a a a a a a a a",
    ]
    sents = module.sentences(lines, min_words=8, max_words=40)
    assert [len(w) for w in sents] == [
        9,
        9,
        9,
    ]  # heading skipped, "short one ." too short, split after " . "
    rows = module.examples(sents, span=4, seed=5)
    assert rows == module.examples(sents, span=4, seed=5)
    assert (
        sorted(label for _, label in rows) == ["original"] * 2 + ["shuffled"] * 2
    )  # all-"a" sentence dropped
    originals = {text for text, label in rows if label == "original"}
    for text, label in rows:
        if label != "shuffled":
            continue
        words = text.split()
        source = next(o.split() for o in originals if sorted(o.split()) == sorted(words))
        changed = [i for i, (a, b) in enumerate(zip(source, words)) if a != b]
        assert changed and changed[-1] - changed[0] < 4  # within one span of 4 consecutive words
    rng = __import__("random").Random(0)
    assert all(module.shuffle_span(list("abab"), 2, rng) != list("abab") for _ in range(20))
    assert module.shuffle_span(["x"] * 6, 3, rng) is None


def test_word_order_cli_writes_balanced_binarized_splits(spm_model, mono_data, tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    sample = read_sample("train", "en")
    write_lines(raw / "train.txt", [" = Title = "] + [s.rstrip(".") + " ." for s in sample[:300]])
    write_lines(raw / "valid.txt", [s.rstrip(".") + " ." for s in sample[300:400]])
    proc = run(
        [
            sys.executable,
            ROOT / "data_prep" / "word_order.py",
            "--raw",
            raw,
            "--spm",
            spm_model,
            "--dict",
            mono_data / "dict.txt",
            "--out",
            tmp_path / "wo",
            "--min-words",
            "6",
        ]
    )
    for split in ("train", "valid"):
        labels = (tmp_path / "wo" / "raw" / f"{split}.label").read_text().split()
        assert labels.count("original") == labels.count("shuffled") > 10
        assert (tmp_path / "wo" / "bin" / "input0" / f"{split}.bin").exists()
    assert "train:" in proc.stderr and "binarized in" in proc.stderr
    bad = run(
        [
            sys.executable,
            ROOT / "data_prep" / "word_order.py",
            "--raw",
            raw,
            "--spm",
            spm_model,
            "--dict",
            mono_data / "dict.txt",
            "--out",
            tmp_path / "bad",
            "--span",
            "1",
        ],
        check=False,
    )
    assert (
        bad.returncode == 2
        and "--span must be >= 2" in bad.stderr
        and "Traceback" not in bad.stderr
    )


def test_minilm_table_collects_logs_and_tests_over_seeds(tmp_path):
    """reproduction/position_masking/collect_minilm.py: the last validation of each log, mean and
    spread over seeds, and Welch's t-test (checked against the formula with the
    Welch-Satterthwaite degrees of freedom)."""
    import importlib.util
    import json
    import statistics

    from scipy import stats

    spec = importlib.util.spec_from_file_location(
        "collect_minilm", ROOT / "reproduction" / "position_masking" / "collect_minilm.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    accs = {"minilm": [60.0, 61.0, 59.5], "p0": [70.0, 71.5, 69.0], "p0.10": [72.0, 73.0, 71.0]}
    for name, values in accs.items():
        if name != "minilm":
            (tmp_path / "pretrain" / name).mkdir(parents=True)
            position = (
                "" if name == "p0" else "| position_accuracy 12.25 "
            )  # not logged without position masks
            (tmp_path / "pretrain" / name / "train.log").write_text(
                f"x | valid | epoch 001 | loss 9 | mlm_accuracy 40.5 {position}| num_updates 300\n"
            )
        for seed, acc in zip((1, 2, 3), values):
            folder = tmp_path / "finetune" / f"{name}-s{seed}"
            folder.mkdir(parents=True)
            (folder / "train.log").write_text(
                f"x | valid | epoch 001 | loss 1 | accuracy {acc - 10} | num_updates 200\n"
                f"x | valid | epoch 002 | loss 1 | accuracy {acc} | num_updates 300\n"
            )
    page = tmp_path / "position-masking.md"
    page.write_text("a\n<!-- table3-minilm:start -->\nold\n<!-- table3-minilm:end -->\nb\n")
    module.main(
        [
            "--work",
            str(tmp_path),
            "--probs",
            "0",
            "0.10",
            "--seeds",
            "1",
            "2",
            "3",
            "--publish",
            str(tmp_path / "pub.json"),
            "--page",
            str(page),
        ]
    )
    summary = json.loads((tmp_path / "pub.json").read_text())
    assert summary["starts"]["p0"]["accuracy_per_seed"] == accs["p0"]
    assert summary["starts"]["p0.10"]["pretrain_valid"]["position_accuracy"] == 12.25
    a, b = accs["p0.10"], accs["minilm"]
    va, vb = statistics.variance(a) / 3, statistics.variance(b) / 3
    t = (statistics.fmean(a) - statistics.fmean(b)) / (va + vb) ** 0.5
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 2)
    [test] = [x for x in summary["tests"] if x["start"] == "p0.10" and x["against"] == "minilm"]
    assert (
        abs(test["p_value"] - round(2 * stats.t.sf(abs(t), df), 4)) < 1e-4
        and test["verdict"] == "better"
    )
    assert (
        "| all-MiniLM-L6-v2 as converted | - | 60.17 ± 0.76 | 60.0, 61.0, 59.5 |"
        in page.read_text()
    )
    assert (
        "| MiniLM + continued pre-training, --position-mask-prob 0 | 40.50 / - |"
        in page.read_text()
    )

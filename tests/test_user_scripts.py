"""Every script a README under examples/ tells users to run, end to end on tiny data made here:
the data_prep step it calls, a few updates of a tiny architecture, decoding (or validation) and
the score it writes. The scores of such runs mean nothing; what is checked is that each script
runs as documented, writes the files its header names, prints fairseq's progress, and that
the pretrained worked example writes no Gigaword OOV junk. One tiny data set per family is
shared by its scripts (module-scoped fixtures). The fairseq commands a script calls by name are
forked from the tests' server (``tests.forked_cli``), which tests/test_forked_cli.py holds to
fresh processes."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from data_prep.text import gigaword_style
from tests.conftest import (
    ROOT,
    TINY_DIMS,
    cli_env,
    read_sample,
    save_tiny_bert,
    script_env,
    write_lines,
)

EXAMPLES = ROOT / "examples"
TINY = " ".join(TINY_DIMS)
PROGRESS = re.compile(r"^  (train_inner|train|valid) \|", re.M)  # examples/progress.sh's lines


def bash(script: str, *args, env: dict | None = None) -> str:
    """Run examples/SCRIPT with ARGS; its stdout and stderr, or the failure with both."""
    proc = subprocess.run(
        ["bash", str(EXAMPLES / script), *map(str, args)],
        capture_output=True,
        text=True,
        env=script_env() | (env or {}),
    )
    assert proc.returncode == 0, (
        f"{script} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    )
    return proc.stdout + proc.stderr


def refused(script: str, *args) -> str:
    """Run examples/SCRIPT with ARGS, which must stop with exit code 2 and nothing but one line on
    stderr: that line."""
    proc = subprocess.run(
        ["bash", str(EXAMPLES / script), *map(str, args)],
        capture_output=True,
        text=True,
        env=script_env(),
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, (
        f"{script} ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    )
    return lines[0]


def words(line: str) -> list[str]:
    """A sample sentence as Gigaword / WikiText text: lowercased, punctuation split off, digits
    '#'."""
    line = re.sub(r"[0-9]", "#", line.lower())
    return re.sub(r"([.,!?;:'\"()])", r" \1 ", line).split()


def lead8_rouge1(articles: Path, titles: Path) -> float:
    """ROUGE-1 F1 x 100 of each article's first 8 words against its title, by rouge-score directly
    (the reference for the lead-8 line the Gigaword scripts print)."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=True)
    pairs = list(zip(articles.read_text().splitlines(), titles.read_text().splitlines()))
    return (
        100
        * sum(scorer.score(t, " ".join(a.split()[:8]))["rouge1"].fmeasure for a, t in pairs)
        / len(pairs)
    )


@pytest.fixture(scope="module")
def gigaword(tmp_path_factory) -> Path:
    """Gigaword in the harvardnlp layout (train10k / valid1k): sample sentences as articles, their
    first five words as titles, `<unk>` in every fifth pair as in the release."""
    d = tmp_path_factory.mktemp("gigaword")
    for prefix, split, n in (("train10k", "train", 160), ("valid1k", "valid", 8)):
        articles, titles = [], []
        for i, line in enumerate(read_sample(split, "en", n)):
            w = words(line)
            if i % 5 == 0:
                w[len(w) // 2] = "<unk>"
            articles.append(" ".join(w))
            titles.append(" ".join(w[:5]))
        write_lines(d / f"{prefix}.article.txt", articles)
        write_lines(d / f"{prefix}.title.txt", titles)
    return d


@pytest.fixture(scope="module")
def wikitext(tmp_path_factory) -> Path:
    """A WikiText-2 style raw file: ' = Title = ' headings, paragraphs of ' . '-separated
    sentences, blank lines between them (data_prep/wikitext2.sh --local FILE splits it)."""
    lines, sample = [], read_sample("train", "en", 480)
    for article in range(8):
        lines += ["", f" = Article {article} = ", ""]
        for paragraph in range(6):
            sents = sample[(article * 6 + paragraph) * 10 : (article * 6 + paragraph + 1) * 10]
            lines += [" " + " ".join(" ".join(words(s)) for s in sents), ""]
    path = tmp_path_factory.mktemp("wikitext") / "wiki.valid.raw"
    write_lines(path, lines)
    return path


# ---- HI-CMLM -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wmt(tmp_path_factory) -> Path:
    """The local layouts of data_prep/wmt14_en_de.sh and wmt16_en_ro.sh (sample pairs; the
    German side stands in for Romanian)."""
    d = tmp_path_factory.mktemp("wmt")
    en, de = read_sample("train", "en", 200), read_sample("train", "de", 200)
    ven, vde = read_sample("valid", "en", 8), read_sample("valid", "de", 8)
    (d / "wmt14" / "opennmt_tok").mkdir(parents=True)
    write_lines(d / "wmt14" / "opennmt_tok" / "train10k.tok.en", en)
    write_lines(
        d / "wmt14" / "opennmt_tok" / "train10k.tok.de", [s.replace("'", "&apos;") for s in de]
    )
    write_lines(d / "wmt14" / "newstest2013.en", ven)
    write_lines(d / "wmt14" / "newstest2013.de", vde)
    (d / "wmt16").mkdir()
    for name, lines in (
        ("train10k.europarl.en", en),
        ("train10k.europarl.ro", de),
        ("newsdev2016.en", ven),
        ("newsdev2016.ro", vde),
    ):
        write_lines(d / "wmt16" / name, lines)
    return d


@pytest.mark.parametrize(
    "script,local,tgt,strategies",
    [
        ("wmt14_en_de.sh", "wmt14", "de", ["fence_replace", "all_mask"]),
        ("wmt16_en_ro.sh", "wmt16", "ro", ["weighted_sum"]),
    ],
)
def test_hi_cmlm_paper_recipe(wmt, tmp_path, script, local, tgt, strategies):
    """data_prep/DATASET.sh --local, then run.sh (train once, decode with each strategy, sacreBLEU);
    with two strategies, run again: the decoding recorded with other settings is redone, and another
    training setting in the same --work is refused."""
    out = bash(
        f"hi_cmlm/{script}",
        "--local",
        wmt / local,
        "--work",
        tmp_path,
        "--vocab",
        200,
        "--arch",
        "hi_cmlm_transformer_tiny",
        "--dims",
        TINY,
        "--updates",
        2,
        "--update-freq",
        1,
        "--warmup",
        1,
        "--max-tokens",
        1000,
        "--strategies",
        " ".join(strategies),
    )
    assert (tmp_path / "data" / "bin" / f"dict.{tgt}.txt").is_file()
    assert PROGRESS.search(out)
    for strategy in strategies:
        decode = tmp_path / "hi_cmlm" / f"decode-{strategy}"
        assert (
            len((decode / "hyp.txt").read_text().splitlines()) == 8
        )  # the validation split (no test offline)
        scores = json.loads((decode / "bleu.json").read_text())
        split = "yes" if tgt == "de" else "no"  # German compounds split (tokenized BLEU)
        assert scores["name"] == "BLEU"
        assert scores["tokenized"]["signature"].startswith(f"moses:{tgt}|compound-split:{split}|")
        assert f"decode-{strategy}: BLEU" in out and "; tokenized BLEU " in out
    log = (tmp_path / "hi_cmlm" / "train.log").read_text()
    assert (
        "num_updates 2" in log
        and "encoder_embed_dim=32" in log
        and "arch='hi_cmlm_transformer_tiny'" in log
    )
    if len(strategies) == 1:
        return
    # a decoding recorded with other settings is redone (the others are kept); a training with other
    # settings in the same --work is refused before anything runs
    first, second = (tmp_path / "hi_cmlm" / f"decode-{s}" for s in strategies)
    (first / "settings").write_text("--gen-subset valid --ref '' --iter 4 --length-beam 5\n")
    kept = (second / "bleu.json").stat().st_mtime_ns
    again = bash(
        f"hi_cmlm/{script}",
        "--local",
        wmt / local,
        "--work",
        tmp_path,
        "--vocab",
        200,
        "--arch",
        "hi_cmlm_transformer_tiny",
        "--dims",
        TINY,
        "--updates",
        2,
        "--update-freq",
        1,
        "--warmup",
        1,
        "--max-tokens",
        1000,
        "--strategies",
        " ".join(strategies),
    )
    assert (
        f"{first} was decoded with other settings (--gen-subset valid --ref '' --iter 4 "
        "--length-beam 5): decoding again" in again
    )
    assert (
        f"{second} was decoded" not in again and (second / "bleu.json").stat().st_mtime_ns == kept
    )
    assert "--iter 10" in (first / "settings").read_text() and (first / "bleu.json").is_file()
    checkpoint = (tmp_path / "hi_cmlm" / "checkpoints" / "checkpoint_last.pt").read_bytes()
    line = refused(
        "hi_cmlm/run.sh",
        "--data",
        tmp_path / "data" / "bin",
        "--work",
        tmp_path / "hi_cmlm",
        "--seed",
        2,
    )
    assert line.startswith(
        f"error: {tmp_path / 'hi_cmlm' / 'checkpoints'} holds a training with other settings (data "
    )
    assert (
        line.endswith(f"); give another --work or remove {tmp_path / 'hi_cmlm' / 'checkpoints'}")
        and "--seed 1 " in line
    )
    assert (tmp_path / "hi_cmlm" / "checkpoints" / "checkpoint_last.pt").read_bytes() == checkpoint


# ---- ProphetNet and UniLM --------------------------------------------------------------------


def test_prophetnet_gigaword(gigaword, wikitext, tmp_path):
    """The defaults' early stopping (patience 3) on batches in a random order, validated after each
    of the 2 updates; checkpoint_best.pt is decoded and scored, lead-8 beside it. The span
    pre-training reads a WikiText file beside the training articles (--pretrain-text)."""
    work = tmp_path / "run"
    out = bash(
        "prophetnet/gigaword.sh",
        "--data",
        gigaword,
        "--work",
        work,
        "--vocab",
        200,
        "--pretrain-text",
        wikitext,
        "--pretrain-updates",
        2,
        "--finetune-updates",
        2,
        "--validate-every",
        1,
        "--max-tokens",
        1000,
    )
    assert PROGRESS.search(out)
    articles = (tmp_path / "gigaword-data" / "raw" / "train.article").read_text().splitlines()
    corpus = [
        x
        for line in [*wikitext.read_text().splitlines(), *articles]
        for x in gigaword_style(line, True)
    ]
    assert (work / "pretrain-data" / "train.txt").read_text().splitlines() == corpus
    assert len(corpus) > len(articles) and f"pre-training corpus: {len(corpus)} lines" in out
    result = json.loads((work / "results.json").read_text())
    point = json.loads((work / "points" / "best.json").read_text())
    assert (
        point["sentences"] == 8 and 0 <= point["rouge1_f1"] <= 100 and result["points"] == [point]
    )
    assert (
        result["checkpoint"] == "checkpoint_best.pt"
        and result["patience"] == 3
        and result["validate_every"] == 1
    )
    assert (
        result["finetune_updates"] == 2
        and result["pretrain_updates"] == 2
        and result["scored_update"] in (1, 2)
    )
    train = next(
        c
        for c in result["commands"]
        if "translation_prophetnet" in c and c.startswith("fairseq-train")
    )
    assert "--unsorted-batches" in train and "--patience 3" in train and "--lr 7e-4" in train
    pretrain = next(c for c in result["commands"] if "prophetnet_denoising" in c)
    assert pretrain.startswith(f"fairseq-train {work / 'pretrain-data' / 'bin'} ")
    assert len((work / "hyp-best.title").read_text().splitlines()) == 8
    assert (tmp_path / "gigaword-data" / "bin-article" / "dict.article.txt").is_file()
    lead8 = json.loads((work / "rouge-best.json").read_text())["lead8"]["rouge1"]
    raw = tmp_path / "gigaword-data" / "raw"
    assert lead8 == pytest.approx(lead8_rouge1(raw / "valid.article", raw / "valid.title"))
    generate = next(c for c in result["commands"] if c.startswith("fairseq-generate"))
    assert "--lenpen 1.5 " in generate and result["lenpen"] == point["lenpen"] == 1.5  # the default
    # another length penalty: checkpoint_best.pt decoded again, nothing trained again
    again = bash(
        "prophetnet/gigaword.sh",
        "--data",
        gigaword,
        "--work",
        work,
        "--vocab",
        200,
        "--pretrain-text",
        wikitext,
        "--pretrain-updates",
        2,
        "--finetune-updates",
        2,
        "--validate-every",
        1,
        "--max-tokens",
        1000,
        "--lenpen",
        1,
    )
    commands = json.loads((work / "results.json").read_text())["commands"]
    assert (
        "beam 4, lenpen 1.0)" in again
        and json.loads((work / "points" / "best.json").read_text())["lenpen"] == 1.0
    )
    assert (
        sum(c.startswith("fairseq-train") for c in commands) == 2
        and "--lenpen 1.0 " in commands[-2]
    )
    # the same --work with another n, the same data folder with another vocabulary: refused before
    # anything runs
    line = refused(
        "prophetnet/gigaword.sh",
        "--data",
        gigaword,
        "--work",
        work,
        "--vocab",
        200,
        "--ngram",
        1,
        "--pretrain-updates",
        2,
        "--finetune-updates",
        2,
        "--validate-every",
        1,
        "--max-tokens",
        1000,
    )
    assert line.startswith(
        f"error: {work} holds a run with other settings (--prep {tmp_path / 'gigaword-data'} "
    )
    assert (
        " --ngram 2 " in line
        and " --patience 3 " in line
        and line.endswith(f"give another --work or remove {work}")
    )
    assert refused(
        "prophetnet/gigaword.sh",
        "--data",
        gigaword,
        "--work",
        tmp_path / "other",
        "--vocab",
        300,
        "--eval-at",
        2,
        "--finetune-updates",
        2,
    ) == (
        f"error: {tmp_path / 'gigaword-data'} holds binarized data with other settings (--vocab "
        f"200); give another --prep or remove {tmp_path / 'gigaword-data'}"
    )  # --eval-at alone: fixed updates, no early stopping


def test_prophetnet_gigaword_refuses_a_validation_interval_past_the_cap_and_two_ways_to_choose(
    tmp_path,
):
    assert refused("prophetnet/gigaword.sh", "--work", tmp_path, "--finetune-updates", 100) == (
        "error: --validate-every 500 is more than --finetune-updates 100: no validation would "
        "choose the checkpoint; give --validate-every at most 100 or --patience 0"
    )
    assert refused(
        "prophetnet/gigaword.sh", "--work", tmp_path, "--eval-at", 50, "--patience", 3
    ) == ("error: --eval-at and --patience both choose the checkpoints to score; give one")
    assert refused(
        "prophetnet/gigaword.sh", "--work", tmp_path, "--pretrain-text", tmp_path / "none.txt"
    ) == (f"error: --pretrain-text: cannot read {tmp_path / 'none.txt'}")
    assert refused(
        "prophetnet/gigaword.sh",
        "--work",
        tmp_path,
        "--pretrain-text",
        __file__,
        "--pretrain-updates",
        0,
    ) == (
        "error: --pretrain-text is pre-trained on with --pretrain-updates N >= 1 (--model "
        "prophetnet, no --init)"
    )
    assert refused("prophetnet/gigaword.sh", "--work", tmp_path, "--lenpen", "long") == (
        "error: --lenpen takes a number such as 1.0, got 'long'"
    )
    assert not (tmp_path / "commands.txt").exists()  # refused before anything ran
    # an --eval-at point is scored once and its checkpoint deleted: it cannot be decoded again
    (tmp_path / "points").mkdir()
    (tmp_path / "points" / "50.json").write_text(
        json.dumps({"update": 50, "rouge1_f1": 10.0})
    )  # before --lenpen: 1.0
    assert refused(
        "prophetnet/gigaword.sh", "--work", tmp_path, "--eval-at", 50, "--lenpen", 1.5
    ) == (
        f"error: {tmp_path}/points/50.json was decoded with --lenpen 1.0 and its checkpoint "
        "deleted once scored; give that --lenpen or another --work"
    )


def test_unilm_gigaword(gigaword, tmp_path):
    """The defaults' early stopping (patience 3), validated after each of the 2 updates."""
    out = bash(
        "unilm/gigaword.sh",
        "--data",
        gigaword,
        "--out",
        tmp_path,
        "--vocab",
        200,
        "--updates",
        2,
        "--validate-every",
        1,
        "--warmup",
        1,
        "--max-tokens",
        1000,
        "--layers",
        1,
        "--dim",
        32,
        "--ffn",
        64,
        "--heads",
        2,
        "--lenpen",
        1.5,
    )
    assert PROGRESS.search(out)
    result = json.loads((tmp_path / "results.json").read_text())
    assert result["sentences"] == 8 and result["updates"] == 2 and 0 <= result["rouge1_f1"] <= 100
    generate = next(c for c in result["commands"] if c.startswith("fairseq-generate"))
    assert (
        "--lenpen 1.5 " in generate
        and result["lenpen"] == 1.5
        and "beam 4, length penalty 1.5 on" in out
    )
    assert (
        result["checkpoint"] == "checkpoint_best.pt"
        and result["patience"] == 3
        and result["validate_every"] == 1
    )
    assert result["trained_updates"] == 2 and result["scored_update"] in (1, 2)
    train = next(c for c in result["commands"] if c.startswith("fairseq-train"))
    assert (
        "--arch unilm_transformer_small" in train
        and "--unsorted-batches" in train
        and "--max-tokens 1000" in train
    )
    assert len((tmp_path / "hyp.txt").read_text().splitlines()) == 8
    lead8 = json.loads((tmp_path / "rouge.json").read_text())["lead8"]["rouge1"]
    raw = tmp_path / "data" / "raw"
    assert lead8 == pytest.approx(lead8_rouge1(raw / "valid.article", raw / "valid.title"))


def test_unilm_gigaword_refuses_a_validation_interval_past_the_cap_and_a_non_numeric_lenpen(
    gigaword, tmp_path
):
    assert refused(
        "unilm/gigaword.sh", "--data", gigaword, "--out", tmp_path, "--updates", 100
    ) == (
        "error: --validate-every 500 is more than --updates 100: no validation would choose the "
        "checkpoint; give --validate-every at most 100 or --patience 0"
    )
    assert refused("unilm/gigaword.sh", "--out", tmp_path, "--lenpen", "long") == (
        "error: --lenpen takes a number such as 1.0, got 'long'"
    )
    assert not (tmp_path / "commands.txt").exists()  # refused before anything ran


def test_unilm_permutation_lm(wikitext, tmp_path):
    out = bash(
        "unilm/permutation_lm.sh",
        "--text",
        wikitext,
        "--out",
        tmp_path,
        "--vocab",
        200,
        "--valid-lines",
        6,
        "--updates",
        2,
        "--warmup",
        1,
        "--tokens-per-sample",
        64,
        "--layers",
        1,
        "--dim",
        32,
        "--ffn",
        64,
        "--heads",
        2,
    )
    assert PROGRESS.search(out)
    result = json.loads((tmp_path / "results.json").read_text())
    assert result["attention_mask"] == "permutation" and result["valid_ppl_natural_order"] > 1


# ---- position masking ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wikitext_bin(wikitext, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wikitext2")
    proc = subprocess.run(
        [
            "bash",
            str(ROOT / "data_prep" / "wikitext2.sh"),
            "--local",
            str(wikitext),
            "--out",
            str(out),
            "--vocab",
            "200",
        ],
        capture_output=True,
        text=True,
        env=script_env(),
    )
    assert proc.returncode == 0, proc.stderr
    return out


def test_position_masking_pretrain_and_finetune(wikitext_bin, tmp_path):
    small = {"UPDATES": "2", "TOKENS_PER_SAMPLE": "64", "BATCH": "4"}
    out = bash(
        "position_masking/pretrain.sh",
        wikitext_bin / "bin",
        tmp_path / "pt",
        env=small | {"PROB": "0.10"},
    )
    assert PROGRESS.search(out)
    assert "valid on 'valid' subset" in (tmp_path / "pt" / "valid_clean.log").read_text()
    proc = subprocess.run(
        [
            "python",
            str(ROOT / "data_prep" / "word_order.py"),
            "--raw",
            str(wikitext_bin / "raw"),
            "--spm",
            str(wikitext_bin / "spm.model"),
            "--dict",
            str(wikitext_bin / "bin" / "dict.txt"),
            "--out",
            str(tmp_path / "word_order"),
            "--max-pieces",
            "62",
        ],
        capture_output=True,
        text=True,
        env=script_env(),
    )
    assert proc.returncode == 0, proc.stderr
    out = bash(
        "position_masking/finetune.sh",
        tmp_path / "pt" / "checkpoint_last.pt",
        tmp_path / "word_order" / "bin",
        tmp_path / "ft",
        env={"UPDATES": "2", "BATCH": "8", "MAX_POSITIONS": "64"},
    )
    assert "dropped the pre-training position head" in out
    valid = [
        line
        for line in (tmp_path / "ft" / "train.log").read_text().splitlines()
        if "| valid |" in line
    ]
    assert valid and re.search(r"accuracy [\d.]+", valid[-1])


# ---- the pretrained worked example -----------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_bert_folder(gigaword, tmp_path_factory) -> Path:
    """A random tiny BertModel folder whose vocab.txt holds the tiny Gigaword's words."""
    pytest.importorskip("transformers")
    text = " ".join(p.read_text() for p in gigaword.glob("*.txt")).replace("<unk>", " ")
    return save_tiny_bert(tmp_path_factory.mktemp("tiny_bert"), text)


def test_pretrained_minilm_gigaword_with_a_tiny_bert(gigaword, tiny_bert_folder, tmp_path):
    """With --patience: validation ROUGE (--eval-rouge, WordPiece joined by the tiny BERT's
    tokenizer) every 2 updates, early stopping, and checkpoint_best.pt decoded and scored (at the
    validation's length penalty 1.0, then at the default 1.2, data and training not redone); batches
    in a random order; another --max-examples in the same --work is refused in one line, the data
    untouched."""
    out = bash(
        "pretrained/minilm_gigaword.sh",
        "--data",
        gigaword,
        "--work",
        tmp_path,
        "--model-folder",
        tiny_bert_folder,
        "--updates",
        8,
        "--lr",
        2e-2,
        "--warmup",
        1,
        "--max-tokens",
        1000,
        "--max-examples",
        6,
        "--log-interval",
        1,
        "--patience",
        1,
        "--validate-every",
        2,
        "--lenpen",
        "1.0",
    )
    assert PROGRESS.search(out)
    rouge = json.loads((tmp_path / "rouge.json").read_text())
    assert rouge["sentences"] == 6 and 0 <= rouge["rouge1"] <= 100
    assert (
        rouge["lenpen"] == 1.0
        and "beam 4, lenpen 1.0," in out
        and "'unsorted_batches': True" in (tmp_path / "train.log").read_text()
    )
    log = (tmp_path / "train.log").read_text()
    valid = {
        int(u): float(r)
        for r, u in re.findall(
            r"valid on 'valid' subset .*\| rouge1 ([\d.]+) .*\| num_updates (\d+)", log
        )
    }
    assert sorted(valid) == list(range(2, rouge["trained_updates"] + 1, 2))
    assert (
        rouge["trained_updates"] == 8
        or "early stop since valid performance hasn't improved for last 1 runs" in log
    )
    best = max(
        valid, key=lambda u: (valid[u], u)
    )  # of equal scores fairseq keeps the later checkpoint
    assert (rouge["checkpoint"], rouge["update"], rouge["patience"]) == (
        "checkpoint_best.pt",
        best,
        1,
    )
    assert (
        f"scored checkpoint_best.pt: update {best} of the {rouge['trained_updates']} trained" in out
    )
    # here the decoded validation targets are the titles as rouge-score reads them, so the script's
    # ROUGE-1 (fairseq-generate, raw titles) is the one fairseq-train logged
    assert rouge["rouge1"] == pytest.approx(valid[best], abs=1e-3) and valid[best] > 0
    text = tmp_path / "text"
    assert rouge["lead8"]["rouge1"] == pytest.approx(
        lead8_rouge1(text / "valid.article", text / "valid.title")
    )
    assert "lead-8 (the first 8 words of each article)" in out
    # the release's <unk> (UNK after data_prep/gigaword.sh) is one [UNK] piece, never "< un ##k >"
    # or "un ##k"
    raw_unk = sum(
        line.split().count("<unk>")
        for line in (gigaword / "train10k.article.txt").read_text().splitlines()[:6]
    )
    encoded = (tmp_path / "wordpiece" / "train.article").read_text()
    assert raw_unk > 0 and encoded.split().count("[UNK]") == raw_unk and "un ##k" not in encoded
    hyps = (tmp_path / "hyp.txt").read_text().splitlines()
    assert len(hyps) == 6 and not any(re.search(r"unk >|<unk>|\[UNK\]", h) for h in hyps)
    # the default length penalty (1.2, chosen on valid) decodes the same trained checkpoint again
    again = bash(
        "pretrained/minilm_gigaword.sh",
        "--data",
        gigaword,
        "--work",
        tmp_path,
        "--model-folder",
        tiny_bert_folder,
        "--updates",
        8,
        "--lr",
        2e-2,
        "--warmup",
        1,
        "--max-tokens",
        1000,
        "--max-examples",
        6,
        "--log-interval",
        1,
        "--patience",
        1,
        "--validate-every",
        2,
    )
    assert "already done" in again and "already trained" in again and "beam 4, lenpen 1.2," in again
    assert json.loads((tmp_path / "rouge.json").read_text())["lenpen"] == 1.2
    assert "'lenpen': 1.2" in (tmp_path / "generate.log").read_text()
    # other data (--max-examples 5) in the same --work: refused before anything is redone
    binary = sorted((p.name, p.stat().st_mtime_ns) for p in (tmp_path / "bin").iterdir())
    other = refused(
        "pretrained/minilm_gigaword.sh",
        "--data",
        gigaword,
        "--work",
        tmp_path,
        "--model-folder",
        tiny_bert_folder,
        "--updates",
        8,
        "--lr",
        2e-2,
        "--warmup",
        1,
        "--max-tokens",
        1000,
        "--max-examples",
        5,
        "--log-interval",
        1,
        "--patience",
        1,
        "--validate-every",
        2,
    )
    assert other == (
        f"error: {tmp_path / 'checkpoints'} holds a training with other settings (at most 8 "
        "updates, early stopping on validation ROUGE-1 (--patience 1, validated every 2 updates); "
        "lr 0.02, warm-up 1, --max-tokens 1000, seed 1; --max-examples 6, tokenizer "
        f"{tiny_bert_folder}); give another --work or remove {tmp_path / 'checkpoints'}"
    )
    assert sorted((p.name, p.stat().st_mtime_ns) for p in (tmp_path / "bin").iterdir()) == binary


def test_pretrained_minilm_gigaword_refuses_a_length_penalty_that_is_no_number(tmp_path):
    proc = subprocess.run(
        [
            "bash",
            str(EXAMPLES / "pretrained" / "minilm_gigaword.sh"),
            "--work",
            str(tmp_path),
            "--lenpen",
            "long",
        ],
        capture_output=True,
        text=True,
        env=script_env(),
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        2,
        "",
        "error: --lenpen takes a number such as 1.0, got 'long'\n",
    )


def test_pretrained_minilm_position_masking_with_a_tiny_bert(wikitext, tiny_bert_folder, tmp_path):
    out = bash(
        "pretrained/minilm_position_masking.sh",
        "--wikitext",
        wikitext,
        "--work",
        tmp_path,
        "--model-folder",
        tiny_bert_folder,
        "--updates",
        2,
        "--finetune-updates",
        2,
        "--tokens-per-sample",
        64,
        "--log-interval",
        1,
    )
    assert (
        PROGRESS.search(out)
        and "position_mask_prob=0.1" in (tmp_path / "pretrain" / "train.log").read_text()
    )
    accuracy = float((tmp_path / "accuracy.txt").read_text())
    assert (
        0 <= accuracy <= 100
        and f"word-order validation accuracy: {(tmp_path / 'accuracy.txt').read_text().strip()}%"
        in out
    )
    # the same settings again: nothing retrained; another --prob in the same --work: refused in one
    # line
    again = bash(
        "pretrained/minilm_position_masking.sh",
        "--wikitext",
        wikitext,
        "--work",
        tmp_path,
        "--model-folder",
        tiny_bert_folder,
        "--updates",
        2,
        "--finetune-updates",
        2,
        "--tokens-per-sample",
        64,
        "--log-interval",
        1,
    )
    assert "already trained" in again and "already fine-tuned" in again
    other = refused(
        "pretrained/minilm_position_masking.sh",
        "--wikitext",
        wikitext,
        "--work",
        tmp_path,
        "--model-folder",
        tiny_bert_folder,
        "--updates",
        2,
        "--finetune-updates",
        2,
        "--tokens-per-sample",
        64,
        "--log-interval",
        1,
        "--prob",
        0,
    )
    pre = tmp_path / "pretrain"
    assert other == (
        f"error: {pre} holds a training with other settings (--prob 0.10, --updates 2, "
        f"--tokens-per-sample 64, from {tmp_path / 'converted' / 'model.pt'}); give another --work "
        f"or remove {pre}"
    )


def test_position_masking_glue_recipe_with_a_tiny_bert(gigaword, tiny_bert_folder, tmp_path):
    """examples/position_masking/glue.sh end to end on a tiny CoLA-layout folder: the budget it
    prints is epochs of ceil(N / 32) updates, the dev score is the scorer's line, the published
    reference stands beside it, and the hub's ``classify`` on the fine-tuned checkpoint gives the
    scorer's predictions; every sentence is used (163 = 5 x 32 + 3: 6 batches an epoch, where
    fairseq's default batch multiple of 8 would make 5). Run again after its fine-tuning stopped at
    update 20 of 24 (checkpoint_last.pt as that validation's checkpoint left it, no finished mark),
    it continues from there to the same weights and dev score; other settings in the same --work are
    refused in one line."""
    import torch

    from fairseq_ext.checkpoints.loading import safe_load

    sentences = [
        line.replace("<unk>", "")
        for name in ("train10k", "valid1k")
        for line in (gigaword / f"{name}.title.txt").read_text().splitlines()
    ][:163]
    rows = [f"{s}\t{i % 2}" for i, s in enumerate(sentences)]
    (tmp_path / "glue" / "CoLA").mkdir(parents=True)
    write_lines(tmp_path / "glue" / "CoLA" / "train.tsv", rows)
    write_lines(tmp_path / "glue" / "CoLA" / "dev.tsv", rows[:10])
    command = [
        "position_masking/glue.sh",
        "--task",
        "CoLA",
        "--glue",
        tmp_path / "glue",
        "--work",
        tmp_path / "w",
        "--model-folder",
        tiny_bert_folder,
        "--epochs",
        4,
        "--straight-through",
        "--lr",
        "1e-3",
    ]
    out = bash(*command)
    ft = tmp_path / "w" / "finetune"
    assert "4 epoch(s) of 163 sentences = 24 updates of 32" in out
    assert re.search(
        r"\| valid on 'valid' subset \|.*\| num_updates 24 \|", (ft / "train.log").read_text()
    )
    assert "attention_dropout_straight_through=True" in (ft / "train.log").read_text()
    assert len((ft / "dev.predictions").read_text().split()) == 10
    score = (tmp_path / "w" / "dev.score").read_text().strip()
    assert re.fullmatch(r"mcc -?\d+\.\d\d", score)
    assert (
        f"CoLA dev {score} (Matthews correlation x 100) after 24 updates; published "
        "MiniLM-L6xH384: 47.5" in out
    )
    # the hub API classifies the dev sentences as the scorer's predictions say (the same tokens,
    # head and labels)
    from fairseq_ext import hub

    model = hub.from_pretrained(
        ft,
        "checkpoint_last.pt",
        data_name_or_path=str(tmp_path / "w" / "data" / "bin"),
        bpe="wordpiece",
        wordpiece_tokenizer=str(tiny_bert_folder),
    )
    dev = [row.split("\t")[0] for row in rows[:10]]
    assert model.classify(dev) == (ft / "dev.predictions").read_text().split()
    # stopped at update 20 and run again: it continues from there
    whole = safe_load(str(ft / "checkpoint_last.pt"))["model"]
    assert sorted(p.name for p in ft.glob("checkpoint_*_*.pt")) == [
        "checkpoint_4_20.pt"
    ]  # 24 ends epoch 4
    (ft / "checkpoint_4_20.pt").replace(ft / "checkpoint_last.pt")
    (ft / "finished").unlink()
    out = bash(*command)
    assert f"continuing from {ft / 'checkpoint_last.pt'}" in out
    assert "(epoch 4 @ 20 updates)" in (ft / "train.log").read_text()
    resumed = safe_load(str(ft / "checkpoint_last.pt"))["model"]
    assert resumed.keys() == whole.keys() and all(torch.equal(resumed[k], whole[k]) for k in whole)
    assert (tmp_path / "w" / "dev.score").read_text().strip() == score
    proc = subprocess.run(
        ["bash", str(EXAMPLES / command[0]), *map(str, command[1:-1]), "2e-3"],
        capture_output=True,
        text=True,
        env=cli_env(),
    )
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"error: {ft} holds a fine-tuning with other settings (task=CoLA updates=24 lr=1e-3 seed=1 "
        f"straight_through=1 model={tmp_path / 'w' / 'converted' / 'model.pt'}); give another "
        f"--work or remove {ft}"
    ]


# ---- scaling out -----------------------------------------------------------------------------


def test_scaling_out_cpu_gloo_trains(tiny_data, tmp_path):
    """The cpu-gloo recipe for real: two processes, two updates of a tiny HI-CMLM, one checkpoint
    (the other modes need GPUs: tests/test_scaling_out.py parses their command lines)."""
    out = bash(
        "scaling_out.sh",
        "hi_cmlm",
        "cpu-gloo",
        tiny_data,
        "-s",
        "en",
        "-t",
        "de",
        "--arch",
        "hi_cmlm_transformer_tiny",
        *TINY_DIMS,
        "--max-update",
        2,
        "--max-tokens",
        1000,
        "--warmup-updates",
        1,
        "--no-epoch-checkpoints",
        "--num-workers",
        0,
        env={
            "NPROC": "2",
            "SAVE_DIR": str(tmp_path / "ckpt"),
            "MASTER_PORT": str(29600 + os.getpid() % 300),
        },
    )
    from fairseq_ext.checkpoints import safe_load

    assert (
        safe_load(str(tmp_path / "ckpt" / "checkpoint_last.pt"))["cfg"]["distributed_training"][
            "distributed_world_size"
        ]
        == 2
    )  # the configuration is in the checkpoint (the log shows it with --verbose)
    assert re.search(r"\| train \| .*\| num_updates 2 \|", out)

"""The checkpoint shipped for `make quickstart` (examples/quickstart/model): it pickles nothing
beyond the allow-list, matches the shipped dictionary, and translates held-out sentences
(sacreBLEU well above an untrained model's 0-1) through the real fairseq-generate."""

import re

import sacrebleu
import torch

from fairseq_ext.checkpoints import safe_load, unsafe_globals
from tests.conftest import ROOT, USER_DIR, binarize, read_sample, run

MODEL = ROOT / "examples" / "quickstart" / "model"
N = 100


def test_shipped_checkpoints_are_safe_and_match_the_dictionary():
    dict_rows = 4 + len((MODEL / "dict.txt").read_text(encoding="utf-8").splitlines())
    for name in ("checkpoint.pt", "teacher.pt"):
        path = str(MODEL / name)
        assert unsafe_globals(path) == []
        weights = torch.load(path, map_location="cpu", weights_only=True)["model"]
        # translation_lev adds <mask> to the dictionary; the teacher's translation task does not
        assert weights["encoder.embed_tokens.weight"].shape[0] in (dict_rows, dict_rows + 1)


def test_shipped_student_translates_held_out_sentences(tmp_path):
    src, ref = read_sample("test", "en", N), read_sample("test", "de", N)
    data = binarize(MODEL / "spm.model", tmp_path, {"test": (src, ref)}, srcdict=MODEL / "dict.txt")
    out = run(
        [
            "fairseq-generate",
            data,
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
            "--gen-subset",
            "test",
            "--batch-size",
            "50",
            "--iter-decode-max-iter",
            "4",
            "--iter-decode-with-beam",
            "2",
            "--post-process",
            "sentencepiece",
        ]
    )
    hyps = {}
    for line in out.stdout.splitlines():
        if line.startswith("D-"):
            sentence_id, _, text = line.split("\t")
            hyps[int(sentence_id[2:])] = text
    assert sorted(hyps) == list(range(N))
    bleu = sacrebleu.corpus_bleu([hyps[i] for i in range(N)], [ref]).score
    assert bleu > 10, bleu


def test_make_quickstart_continues_the_student_as_it_was_trained():
    """examples/quickstart/run.sh continues the shipped student with the layout and training input
    its saved configuration records (HI-CMLM section 3.3 or a decoding rule, copy share, fence
    start), and that configuration is the paper's (Wang et al. 2021, section 3.3: first target
    word [MASK])."""
    cfg = vars(
        safe_load(str(MODEL / "checkpoint.pt"))["cfg"]["model"]
    )  # an argparse Namespace (add_args)
    script = (ROOT / "examples" / "quickstart" / "run.sh").read_text()
    flags = dict(
        re.findall(
            r"--(arch|encoder-layers|decoder-layers|train-decoder-input|train-copy-share|fence-first|"
            r"hybrid-strategy) (\S+)",
            script,
        )
    )
    assert flags == {
        "arch": cfg["arch"],
        "encoder-layers": str(cfg["encoder_layers"]),
        "decoder-layers": str(cfg["decoder_layers"]),
        "train-decoder-input": cfg["train_decoder_input"],
        "train-copy-share": str(cfg["train_copy_share"]),
        "fence-first": cfg["fence_first"],
        "hybrid-strategy": cfg["hybrid_strategy"],
    }
    assert (cfg["train_decoder_input"], cfg["fence_first"]) == ("paper", "mask")
    assert safe_load(str(MODEL / "checkpoint.pt"))["optimizer_history"][-1]["num_updates"] == 4000


def test_distilled_targets_are_the_shipped_teachers_beam_search(tmp_path):
    """examples/quickstart/data/train.distilled.de (examples/quickstart/distill_sample.sh) holds one
    target per training sentence, and its lines are what the shipped teacher's beam search (beam
    5, as data_prep/distill.sh decodes) writes for those sentences, recomputed here for a few."""
    data_dir = ROOT / "examples" / "quickstart" / "data"
    distilled = (data_dir / "train.distilled.de").read_text(encoding="utf-8").splitlines()
    sources = (data_dir / "train.en").read_text(encoding="utf-8").splitlines()
    assert len(distilled) == len(sources) == 3000
    assert distilled != (data_dir / "train.de").read_text(encoding="utf-8").splitlines()
    picked = [0, 1, 2, 3, 500, 1500, 2999]
    src = [sources[i] for i in picked]
    data = binarize(
        MODEL / "spm.model", tmp_path, {"train": (src, src)}, srcdict=MODEL / "dict.txt"
    )
    out = run(
        [
            "fairseq-generate",
            data,
            "--user-dir",
            USER_DIR,
            "--task",
            "translation",
            "-s",
            "en",
            "-t",
            "de",
            "--path",
            MODEL / "teacher.pt",
            "--gen-subset",
            "train",
            "--beam",
            "5",
            "--batch-size",
            "128",
            "--required-batch-size-multiple",
            "1",
            "--post-process",
            "sentencepiece",
        ]
    )
    hyps = {
        int(line.split("\t")[0][2:]): line.split("\t")[2]
        for line in out.stdout.splitlines()
        if line.startswith("D-")
    }
    assert [hyps[i] for i in range(len(picked))] == [distilled[i] for i in picked]


def test_the_packaged_student_is_the_quickstarts_file():
    """``hub.from_pretrained("hi-cmlm-multi30k-en-de")`` (what a pip install has) and `make
    quickstart` read one file: examples/quickstart/model/checkpoint.pt is a link to the package's
    (the bytes every recorded student SHA-256 names); the tokenizer and dictionaries are the
    quickstart's files."""
    from fairseq_ext.hub.loading import SHIPPED, shipped_names

    assert shipped_names() == ["hi-cmlm-multi30k-en-de"]
    packaged = SHIPPED / "hi-cmlm-multi30k-en-de"
    assert (MODEL / "checkpoint.pt").is_symlink()
    assert (MODEL / "checkpoint.pt").resolve() == (packaged / "checkpoint.pt").resolve()
    assert not (packaged / "checkpoint.pt").is_symlink()  # a wheel copies a file, not a link
    for name in ("spm.model", "dict.en.txt", "dict.de.txt"):
        assert (packaged / name).read_bytes() == (MODEL / name).read_bytes()
    assert sorted(p.name for p in packaged.iterdir()) == [
        "checkpoint.pt",
        "dict.de.txt",
        "dict.en.txt",
        "spm.model",
    ]

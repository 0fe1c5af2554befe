"""reproduction/hi_cmlm/val_decode.py: the shipped student's decoding of val sentences, its
hypotheses in sentence order, and sacreBLEU of them against the raw references; a finished
decoding is not redone."""

import json
import os

import sacrebleu

from reproduction.hi_cmlm.val_decode import decode
from tests.conftest import ROOT, binarize, read_sample

MODEL = ROOT / "examples" / "quickstart" / "model"


def test_val_decoding_scores_its_hypotheses_in_sentence_order(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{os.path.dirname(os.sys.executable)}:{os.environ['PATH']}")
    src, ref = read_sample("test", "en", 12), read_sample("test", "de", 12)
    data = binarize(
        MODEL / "spm.model", tmp_path, {"valid": (src, ref)}, srcdict=MODEL / "dict.txt"
    )
    refs = tmp_path / "val.de"
    refs.write_text("\n".join(ref) + "\n", encoding="utf-8")
    out = tmp_path / "decode"
    decode(data, MODEL / "checkpoint.pt", refs, out, "all_mask")
    hyps = (out / "hyp.txt").read_text(encoding="utf-8").splitlines()
    detok = {
        int(line.split("\t")[0][2:]): line.split("\t")[2]
        for line in (out / "generate.txt").read_text(encoding="utf-8").splitlines()
        if line.startswith("D-")
    }
    assert hyps == [detok[i] for i in range(12)]
    assert json.loads((out / "bleu.json").read_text())["score"] == round(
        sacrebleu.corpus_bleu(hyps, [ref]).score, 1
    )
    assert (
        "'hybrid_strategy': 'all_mask'"
        in (out / "generate.txt").read_text() + (out / "generate.log").read_text()
    )
    before = (out / "bleu.json").stat().st_mtime_ns
    decode(data, MODEL / "checkpoint.pt", refs, out, "all_mask")
    assert (out / "bleu.json").stat().st_mtime_ns == before

"""reproduction/hi_cmlm/stop_unchanged.py: the stopping rule's loop is the product's lean loop
where the rule does not fire (a sentence whose length candidates all ran every pass decodes as
with --iter-decode-force-max-iter), it stops a candidate no later than the last pass, and the
committed results say what the rule costs on val."""

import json
from argparse import Namespace

import torch

from fairseq_ext.generation.lean_mask_predict import VocabularyProjection
from reproduction.hi_cmlm import stop_unchanged as stop
from tests.conftest import load_shipped_student, read_sample


def test_where_the_rule_does_not_fire_the_loop_is_the_products(tmp_path):
    import sentencepiece as spm

    model, task = load_shipped_student(tmp_path)
    sp = spm.SentencePieceProcessor(model_file=str(stop.own_inputs.MODEL_DIR / "spm.model"))
    d = task.src_dict
    sources = [
        torch.tensor([d.bos()] + [d.index(p) for p in sp.encode(line, out_type=str)] + [d.eos()])
        for line in read_sample("test", "en", 16)
    ]
    forced = task.build_generator(
        [model],
        Namespace(iter_decode_max_iter=3, iter_decode_with_beam=1, iter_decode_force_max_iter=True),
    )
    unchanged = fired = 0
    for s in sources:
        sample = {
            "id": torch.tensor([0]),
            "net_input": {"src_tokens": s[None], "src_lengths": torch.tensor([len(s)])},
        }
        (hypo,), ran = stop.decode_stopping_when_unchanged(
            model, sample, 4, 1, d.unk(), VocabularyProjection()
        )
        assert 2 <= ran[0] <= 4 and hypo[0]["steps"] == ran[0] - 1
        if ran[0] == 4:
            unchanged += 1
            assert torch.equal(hypo[0]["tokens"], forced.generate([model], sample)[0][0]["tokens"])
        else:
            fired += 1
    assert unchanged and fired


def test_the_committed_results_state_the_bleu_change_on_val():
    record = json.loads(stop.RESULTS.read_text(encoding="utf-8"))
    assert record["data"] == "examples/quickstart/data/valid, 200 pairs"
    assert [
        (r["passes"], r["length_beam"], r["length_offset"]) for r in record["rows"]
    ] == stop.SETTINGS
    for row in record["rows"]:
        assert row["bleu_change"] == round(row["bleu_rule"] - row["bleu_product"], 2)
        assert row["mean_passes_rule"] <= row["passes"]

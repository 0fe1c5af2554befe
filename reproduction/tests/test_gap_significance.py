"""The paired bootstrap of ``reproduction/hi_cmlm/gap_significance.py`` (sacreBLEU's
``paired-bs``): a system one word away from its baseline does not differ from it, a system that
copies the references does, and the BLEUs it reports are sacreBLEU's corpus BLEUs of the same
outputs."""

from __future__ import annotations

import sacrebleu

from reproduction.hi_cmlm.gap_significance import paired_bootstrap

REFS = [f"a man number {i} rides a red bicycle down the hill" for i in range(40)]
WEAK = [f"the man {i} is on a bike" for i in range(40)]


def test_a_system_one_word_from_its_baseline_does_not_differ():
    near = WEAK[:-1] + ["the man 39 rides a bike"]
    (row,) = paired_bootstrap({"a": WEAK, "b": near}, REFS, pairs=[("a", "b")], resamples=200)
    assert 0 < row["difference"] < 1 and row["p_value"] > 0.05


def test_a_system_copying_the_references_differs_and_its_bleus_are_sacrebleus():
    (row,) = paired_bootstrap(
        {"weak": WEAK, "copy": REFS}, REFS, pairs=[("weak", "copy")], resamples=200
    )
    assert row["p_value"] < 0.05 and row["difference"] > 50
    assert row["baseline_bleu"] == round(sacrebleu.corpus_bleu(WEAK, [REFS]).score, 2)
    assert row["system_bleu"] == 100.0

"""The shared ROUGE scorer against hand-computed F1 values."""
import pytest

from fairseq_ext.analysis.rouge import rouge_f1


def test_rouge_matches_hand_computation():
    # hyp "the cat sat" vs ref "the cat sat down": unigrams P=1, R=3/4; bigrams P=1, R=2/3;
    # LCS 3 -> same as unigrams. Second pair identical -> 1. Means over the two sentences.
    s = rouge_f1(["the cat sat", "police arrest two men"], ["the cat sat down", "police arrest two men"])
    f1 = 2 * 1 * 0.75 / 1.75
    f2 = 2 * 1 * (2 / 3) / (1 + 2 / 3)
    assert s["rouge1"] == pytest.approx(100 * (f1 + 1) / 2)
    assert s["rouge2"] == pytest.approx(100 * (f2 + 1) / 2)
    assert s["rougeL"] == pytest.approx(100 * (f1 + 1) / 2)


def test_rouge_stems_and_rejects_mismatched_lengths():
    assert rouge_f1(["police arrested men"], ["police arrest man"])["rouge1"] == pytest.approx(100 * 2 / 3)
    with pytest.raises(ValueError, match="hypotheses for"):
        rouge_f1(["a"], ["a", "b"])

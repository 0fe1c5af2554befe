"""The shared ROUGE scorer against hand-computed F1 values."""

import json

import pytest

from fairseq_ext.analysis.rouge import f1_sums, lead, main, rouge_f1


def test_rouge_matches_hand_computation():
    # hyp "the cat sat" vs ref "the cat sat down": unigrams P=1, R=3/4; bigrams P=1, R=2/3;
    # LCS 3 -> same as unigrams. Second pair identical -> 1. Means over the two sentences.
    s = rouge_f1(
        ["the cat sat", "police arrest two men"], ["the cat sat down", "police arrest two men"]
    )
    f1 = 2 * 1 * 0.75 / 1.75
    f2 = 2 * 1 * (2 / 3) / (1 + 2 / 3)
    assert s["rouge1"] == pytest.approx(100 * (f1 + 1) / 2)
    assert s["rouge2"] == pytest.approx(100 * (f2 + 1) / 2)
    assert s["rougeL"] == pytest.approx(100 * (f1 + 1) / 2)


def test_rouge_stems_and_rejects_mismatched_lengths():
    assert rouge_f1(["police arrested men"], ["police arrest man"])["rouge1"] == pytest.approx(
        100 * 2 / 3
    )
    with pytest.raises(ValueError, match="hypotheses for"):
        rouge_f1(["a"], ["a", "b"])


def test_lead_baseline_is_scored_beside_the_hypotheses(tmp_path, capsys):
    """--source: each article's first N words scored against the references, by hand here:
    'police arrest two' vs 'police arrest two men' has unigram P = 1, R = 3/4."""
    (tmp_path / "hyp").write_text("police arrest two men\n")
    (tmp_path / "ref").write_text("police arrest two men\n")
    (tmp_path / "src").write_text("police arrest two suspects in the city on monday\n")
    main(
        [
            "--hyp",
            str(tmp_path / "hyp"),
            "--ref",
            str(tmp_path / "ref"),
            "--source",
            str(tmp_path / "src"),
            "--lead",
            "3",
            "--json",
            str(tmp_path / "out.json"),
        ]
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("ROUGE-1=100.00 ROUGE-2=100.00 ROUGE-L=100.00")
    f1 = 2 * 0.75 / 1.75
    assert (
        lines[1] == f"ROUGE-1={100 * f1:.2f} ROUGE-2={100 * 2 * (2 / 3) / (1 + 2 / 3):.2f} "
        f"ROUGE-L={100 * f1:.2f} "
        "lead-3 (the first 3 words of each article)"
    )
    assert json.loads((tmp_path / "out.json").read_text())["lead3"]["rouge1"] == pytest.approx(
        100 * f1
    )
    assert lead("a b c", 8) == "a b c"


def test_unk_markers_of_both_releases_are_one_word():
    assert rouge_f1(["UNK wins"], ["<unk> wins"])["rouge1"] == pytest.approx(100)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--source", "MISSING"], "error: cannot read MISSING: No such file"),
        (["--lead", "0"], "--lead 0: the baseline needs at least 1 word"),
    ],
)
def test_bad_scorer_input_is_one_line(tmp_path, monkeypatch, capsys, extra, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a").write_text("x\n")
    with pytest.raises(SystemExit) as caught:
        main(["--hyp", "a", "--ref", "a", *extra])
    assert caught.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1]


def test_f1_sums_of_parts_add_up_to_the_score_of_all():
    """What --eval-rouge logs per validation batch (tasks.rouge_validation): sums that, added over
    batches and divided by the sentence count, are rouge_f1 of all sentences."""
    hyps = ["the cat sat", "police arrest two men", "a b c d", "nothing"]
    refs = ["the cat sat down", "police arrest men", "a c b d", "something else"]
    parts = [f1_sums(hyps[:1], refs[:1]), f1_sums(hyps[1:], refs[1:])]
    whole = rouge_f1(hyps, refs)
    for t in ("rouge1", "rouge2", "rougeL"):
        assert 100 * sum(p[t] for p in parts) / len(refs) == pytest.approx(whole[t], abs=1e-12)

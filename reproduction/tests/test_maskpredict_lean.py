"""reproduction/benchmarks/maskpredict_lean.py: the lean loop timed beside the reference path in
the same rounds, with the BLEU of the outputs timed; the committed results say the lean loop's
hypotheses equal the generic loop's on every sentence timed."""

import json

import pytest

from reproduction.benchmarks import maskpredict_lean as lean

pytestmark = pytest.mark.cli


def test_a_short_run_times_every_side_on_equal_outputs():
    record = lean.measure({1: 3, 64: 6}, [(2, 3, 2)], rounds=1)
    assert [(r["batch"], r["sentences"], r["setting"]) for r in record["rows"]] == [
        (1, 3, "2 passes, length beam 3, length offset 2"),
        (64, 6, "2 passes, length beam 3, length offset 2"),
    ]
    for row in record["rows"]:
        assert set(row["sentences_per_s"]) == set(row["bleu"]) == set(lean.SIDES)
        assert row["identical_to_generic"] == 1.0
        assert row["bleu"]["lean"] == row["bleu"]["generic"]
        assert row["lean_over_generic"] == pytest.approx(
            row["sentences_per_s"]["lean"] / row["sentences_per_s"]["generic"], rel=0.02
        )
        assert "load average" in row["uptime"]
    assert record["torch_threads"] == 1 and "load average" in record["uptime_start"]


def test_the_committed_results_have_equal_outputs_and_the_load_beside():
    record = json.loads(lean.RESULTS.read_text(encoding="utf-8"))
    assert record["torch_threads"] == 1 and record["student_sha256"] == lean.student_digest(
        lean.STUDENT
    )
    assert {
        (r["batch"], (r["passes"], r["length_beam"], r["length_offset"])) for r in record["rows"]
    } == {(b, s) for b in lean.SENTENCES for s in lean.SETTINGS}
    for row in record["rows"]:
        assert row["identical_to_generic"] == 1.0 and row["bleu"]["lean"] == row["bleu"]["generic"]
        assert "load average" in row["uptime"]

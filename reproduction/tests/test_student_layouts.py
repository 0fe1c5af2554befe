"""reproduction/hi_cmlm/student_layouts.py: its options, the chosen student and the table drawn
from the results."""

import argparse

import pytest

from reproduction.hi_cmlm import student_layouts as layouts


def _bounds(flops: float, ops10: float, ops4: float, flops4: float = 1.5) -> list[dict]:
    return [
        {"batch": 64, "passes": 10, "flops": flops, "operators": 1.0},
        {"batch": 64, "passes": 4, "flops": flops4, "operators": 1.0},
        {"batch": 1, "passes": 10, "flops": 1.0, "operators": ops10},
        {"batch": 1, "passes": 4, "flops": 1.0, "operators": ops4},
    ]


def _row(layout: str, bleu10: float, run: dict | None, bounds, test=None) -> dict:
    row = {
        "layout": layout,
        "training": {"arch": "hi_cmlm_transformer_tiny", "updates": 4000},
        "training_run": run,
        "bleu": bleu10,
        "bleu_per_pass": [20.0, 21.0, 22.0, 23.5] + [bleu10] * 6,
        "bleu_length_beam_1": {"4": bleu10 - 2, "10": bleu10 - 1},
        "bounds": bounds,
    }
    if test:
        row["against_baseline"] = test
    return row


def _results(frontier: dict, chosen_bounds=(1.74, 2.98, 6.44)) -> dict:
    return {
        "sentences": 1014,
        "decoding": "fence_replace, 10 passes",
        "bootstrap_resamples": 1000,
        "baseline": "3+3",
        "chosen": "3+1",
        "chosen_many_passes_against_baseline_few": frontier,
        "candidates": {
            "3+3": _row("3+3 x 192", 29.14, None, _bounds(0.76, 1.64, 3.73, 1.66)),
            "3+1": _row(
                "3+1 x 192",
                28.0,
                {"train_seconds": 3600.0, "encoder_from_teacher": True},
                _bounds(*chosen_bounds),
                {"delta": -1.14, "p_value": 0.004},
            ),
        },
    }


def test_table_marks_the_chosen_student_and_its_change_against_the_baseline():
    results = _results({"delta": 0.1, "p_value": 0.25})
    text = layouts.markdown(results)
    assert (
        "| 3+3 | 3+3 x 192 | `hi_cmlm_transformer_tiny` |  | 4000 |  | 20.00 | 23.50 | 29.14 |  "
        "|  | 0.76x | 1.64x | 3.73x |" in text
    )
    assert (
        "| 3+1 (chosen) | 3+1 x 192 | `hi_cmlm_transformer_tiny` | yes | 4000 | 60 min | 20.00 "
        "| 23.50 | 28.00 | -1.14 | 0.004 | 1.74x | 2.98x | 6.44x |" in text
    )


@pytest.mark.parametrize("text", ["3+1", "=ckpt.pt", "name="])
def test_candidate_needs_a_name_and_a_checkpoint(text):
    with pytest.raises(argparse.ArgumentTypeError, match="NAME=CHECKPOINT"):
        layouts.candidate(text)


def test_candidate_takes_an_optional_training_log():
    assert layouts.candidate("6+1=a.pt,b.log") == (
        "6+1",
        layouts.Path("a.pt"),
        layouts.Path("b.log"),
    )
    assert layouts.candidate("6+1=a.pt") == ("6+1", layouts.Path("a.pt"), None)


def test_baseline_must_be_a_candidate(capsys, tmp_path):
    ckpt = tmp_path / "c.pt"
    ckpt.write_bytes(b"x")
    with pytest.raises(SystemExit):
        layouts.main(
            [
                "--data",
                str(tmp_path),
                "--ref",
                str(ckpt),
                "--work",
                str(tmp_path),
                "--candidate",
                f"a={ckpt}",
                "--candidate",
                f"b={ckpt}",
                "--baseline",
                "c",
            ]
        )
    assert (
        "--baseline c: name one of at least two --candidate entries (a, b)"
        in capsys.readouterr().err
    )


def test_speed_against_quality_compares_the_chosen_with_more_passes_to_the_baseline_with_fewer():
    text = layouts.markdown(_results({"delta": 0.13, "p_value": 0.25}))
    assert (
        "| 3+1 | 10 | 27.00 | 1.74x | 2.98x |" in text
        and "| 3+3 | 4 | 27.14 | 1.66x | 3.73x |" in text
    )
    assert (
        "it scores +0.13 BLEU against 3+3 with 4 passes (p = 0.250); its work bounds there are "
        "1.74x (FLOPs, batch 64) and 2.98x (operators, batch 1) against 1.66x and 3.73x: "
        "neither point is better on both axes"
    ) in text
    slower = layouts.markdown(
        _results({"delta": 0.13, "p_value": 0.25}, chosen_bounds=(1.5, 2.9, 6.0))
    )
    assert "so it is no better a point than the baseline with 4 passes" in slower
    faster = layouts.markdown(
        _results({"delta": -0.3, "p_value": 0.2}, chosen_bounds=(1.8, 3.9, 6.0))
    )
    assert (
        "with 10 passes it does less work and loses no significant BLEU, a better point than "
        "the baseline's 4" in faster
    )
    lost = layouts.markdown(
        _results({"delta": -0.9, "p_value": 0.01}, chosen_bounds=(1.8, 3.9, 6.0))
    )
    assert "neither point is better on both axes" in lost

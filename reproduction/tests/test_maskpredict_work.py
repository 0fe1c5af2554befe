"""The work counts of reproduction/benchmarks/maskpredict_work.py: the counters against hand
counts, the bounds against hand ratios, and the published block against its results file."""

import json

import pytest
import torch

from reproduction.benchmarks import maskpredict_work as work


def test_operator_count_counts_each_aten_call():
    a, b = torch.ones(3), torch.ones(3)
    counted = work.count_work(lambda: torch.mul(torch.add(a, b), b).sum())
    assert counted["operators"] == 3  # add, mul, sum


def test_flop_count_of_a_matrix_product_is_two_per_multiply_add():
    x, w = torch.ones(5, 7), torch.ones(7, 11)
    assert work.count_work(lambda: x @ w)["flops"] == 2 * 5 * 7 * 11


def _record(measured_rows):
    return {
        "command": work.COMMAND,
        "date": "2026-11-26",
        "torch": "2.x",
        "student_sha256": "ab" * 32,
        "student_layout": "3+3 x 192",
        "data": "somewhere",
        "rows": measured_rows,
    }


def test_bounds_are_the_teachers_count_over_the_students():
    rows = [
        {
            "batch": 64,
            "sentences": 128,
            "side": "teacher beam 5",
            "flops_per_sentence": 6e8,
            "operators_per_sentence": 900,
        },
        {
            "batch": 64,
            "sentences": 128,
            "side": "teacher beam 1",
            "flops_per_sentence": 1e8,
            "operators_per_sentence": 300,
        },
        {
            "batch": 64,
            "sentences": 128,
            "side": "student T=4",
            "flops_per_sentence": 3e8,
            "operators_per_sentence": 100,
        },
        {
            "batch": 64,
            "sentences": 128,
            "side": "student T=10",
            "flops_per_sentence": 8e8,
            "operators_per_sentence": 450,
        },
    ]
    assert work.bounds(_record(rows)) == [
        {"batch": 64, "passes": 4, "flops": pytest.approx(2.0), "operators": pytest.approx(9.0)},
        {"batch": 64, "passes": 10, "flops": pytest.approx(0.75), "operators": pytest.approx(2.0)},
    ]
    block = work.render([_record(rows)], {(64, 10): 1.046}, "ab" * 32)
    assert "| 64 | 10 | 0.75x | 2.00x | 1.05x |" in block
    assert "| 64 | 4 | 2.00x | 9.00x | not measured |" in block
    assert "| 64 | student T=10 | 0.800 | 450 |" in block
    other = work.render(
        [_record(rows)], {(64, 10): 1.046}, "cd" * 32
    )  # the bench timed another student
    assert "| 64 | 10 | 0.75x | 2.00x | the bench timed another student |" in other
    assert "| 64 | 10 | 0.75x | 2.00x | not measured |" in work.render([_record(rows)], {}, None)


def test_a_recount_replaces_the_same_students_entry_only():
    old, other = {"student_sha256": "a", "n": 1}, {"student_sha256": "b"}
    assert work.keep([old, other], {"student_sha256": "a", "n": 2}) == [
        other,
        {"student_sha256": "a", "n": 2},
    ]


def test_published_block_is_rendered_from_its_results_file():
    runs = json.loads(work.RESULTS.read_text(encoding="utf-8"))["runs"]
    page = work.PAGE.read_text(encoding="utf-8")
    block = page.split(work.START + "\n", 1)[1].split(work.END, 1)[0]
    assert block == work.render(runs, *work.bench_speedups())
    for record in runs:
        assert {r["side"] for r in record["rows"]} == {
            *(f"teacher beam {b}" for b in work.TEACHER_BEAMS),
            *(f"student T={t}" for t in work.PASSES),
        }


def test_a_kept_count_of_the_same_student_and_torch_is_reused(tmp_path, monkeypatch):
    student = tmp_path / "student.pt"
    student.write_bytes(b"weights")
    digest = work.hicmlm.student_digest(student)
    kept = {
        "student_sha256": digest,
        "torch": torch.__version__,
        "inputs": work.INPUTS,
        "rows": ["kept"],
    }
    results = tmp_path / "work.json"
    results.write_text(
        json.dumps({"runs": [{"student_sha256": "other", "torch": torch.__version__}, kept]})
    )
    monkeypatch.setattr(work, "measure", lambda path: {"rows": ["counted now"], "path": path})
    assert work.counted(student, results) == kept
    results.write_text(
        json.dumps({"runs": [{**kept, "torch": "1.0"}]})
    )  # another torch dispatches differently
    assert work.counted(student, results) == {"rows": ["counted now"], "path": student}
    before = {
        k: v for k, v in kept.items() if k != "inputs"
    }  # counted before the teacher had its own inputs
    results.write_text(json.dumps({"runs": [before]}))
    assert work.counted(student, results) == {"rows": ["counted now"], "path": student}
    assert work.counted(student, tmp_path / "none.json")["rows"] == ["counted now"]

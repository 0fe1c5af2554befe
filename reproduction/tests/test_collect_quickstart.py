"""reproduction/hi_cmlm/collect_quickstart.py says when a result was measured on a student other
than the shipped one, and then compares nothing with the shipped student's score."""

from reproduction.benchmarks.hicmlm import student_digest
from reproduction.hi_cmlm import collect_quickstart


def _runs(digest):
    return [
        {"lr": lr, "seed": seed, "updates": 85, "bleu": bleu, "student_sha256": digest}
        for lr, bleus in ((5e-4, (29.0, 29.5, 30.0)), (1e-4, (30.1, 30.3, 30.2)))
        for seed, bleu in zip((1, 2, 3), bleus)
    ]


def test_learning_rate_runs_of_the_shipped_student_are_compared_with_its_score():
    text = collect_quickstart.learning_rates(_runs(student_digest()), 30.15)
    assert "decoded as above (shipped: 30.1), sacreBLEU by seed" in text
    assert "Seeds above the shipped score: lr 5e-4 0 of 3; lr 1e-4 2 of 3." in text


def test_learning_rate_runs_of_another_student_say_so_and_compare_nothing_with_the_shipped_score():
    text = collect_quickstart.learning_rates(_runs("ab" * 32), 30.15)
    assert "(measured on a student shipped before this one, SHA-256 abababababab...)" in text
    assert "shipped: 30.1" not in text and "Seeds above" not in text
    mixed = _runs("ab" * 32)[:3] + _runs(student_digest())[3:]
    assert "the runs continued different students" in collect_quickstart.learning_rates(
        mixed, 30.15
    )
    assert collect_quickstart._of_another_student(student_digest()) == ""
    assert (
        collect_quickstart._of_another_student(None)
        == " (measured on a student shipped before this one)"
    )

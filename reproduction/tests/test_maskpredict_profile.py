"""reproduction/benchmarks/maskpredict_profile.py's records: the tables drawn from them, a rerun
replacing only its own entry, and the published block against its results file."""

import json

from reproduction.benchmarks import maskpredict_profile as prof


def _parts(total: float, encoder: float) -> dict:
    return {"total": total, "encoder": encoder}


def _run(kind: str, sha: str = "ab" * 32, **extra) -> dict:
    return {
        "kind": kind,
        "student_sha256": sha,
        "student_layout": "3+1 x 192",
        "command": prof.COMMAND,
        "date": "2026-11-26",
        "hardware": "AMD EPYC, 1 thread",
        "reps": 3,
        "passes": 10,
        "load_before": 0.2,
        "load_after": 1.1,
        **extra,
    }


def test_profile_table_gives_ms_per_pass_and_share_of_the_total():
    run = _run(
        "profile", profiles={"1": {"fairseq": _parts(20.0, 5.0), "plugin": _parts(10.0, 4.0)}}
    )
    block = prof.render([run])
    assert (
        "| batch 1, 10 passes: part | fairseq's pass, ms/pass | share "
        "| plugin's pass, ms/pass | share |" in block
    )
    assert "| encoder | 5.00 | 25.0% | 4.00 | 40.0% |" in block
    assert (
        "student 3+1 x 192 (SHA-256 abababababab...)" in block
        and "load average 0.20 before, 1.10 after" in block
    )


def test_a_profile_of_fairseqs_pass_alone_has_one_column():
    """Profiles since issue 84 (the plugin's pass is gone: the lean loop is timed by --speedups)."""
    block = prof.render([_run("profile", profiles={"64": {"fairseq": _parts(8.0, 2.0)}})])
    assert "| batch 64, 10 passes: part | fairseq's pass, ms/pass | share |\n|---|---|---|" in block
    assert "| encoder | 2.00 | 25.0% |\n" in block


def test_speedups_table_names_batch_passes_and_variant():
    block = prof.render(
        [_run("speedups", speedups={"b64 T10 masked+kv+sorted": 2.0071, "b1 T4 masked": 1.07})]
    )
    assert "| batch 64, 10 passes | masked+kv+sorted | 2.007x |" in block
    assert "| batch 1, 4 passes | masked | 1.070x |" in block


def test_a_rerun_replaces_its_own_student_and_kind_only():
    a, b, c = _run("profile", "a"), _run("speedups", "a"), _run("profile", "b")
    new = _run("profile", "a", reps=5)
    assert prof.keep([a, b, c], new) == [b, c, new]


def test_published_block_is_rendered_from_its_results_file():
    runs = (
        json.loads(prof.RESULTS.read_text(encoding="utf-8"))["runs"]
        if prof.RESULTS.exists()
        else []
    )
    page = prof.PAGE.read_text(encoding="utf-8")
    assert page.split(prof.START + "\n", 1)[1].split(prof.END, 1)[0] == prof.render(runs)

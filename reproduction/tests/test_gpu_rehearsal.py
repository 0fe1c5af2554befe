"""``make gpu-rehearsal`` without building its environment: the target parses, a missing
CPython 3.12 and the wrong Python are refused in one line, command lines are recorded relative
to the repository, the published table is the one its record renders, and publishing writes
between the markers only."""

import json
import subprocess
import sys

import pytest

from fairseq_ext.common.errors import FairseqExtError
from reproduction.gpu import rehearse, training
from tests.conftest import ROOT


def test_make_target_parses():
    proc = subprocess.run(
        ["make", "-n", "gpu-rehearsal", "PYTHON312=/opt/py312/bin/python3.12"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0
    assert (
        "-m reproduction.gpu.rehearse setup --venv work/gpu-rehearsal --python "
        "/opt/py312/bin/python3.12" in proc.stdout
    )
    assert (
        "work/gpu-rehearsal/bin/python -m reproduction.gpu.rehearse run --wheels "
        "reproduction/gpu/wheels" in proc.stdout
    )


def test_a_python_that_is_not_3_12_is_refused_in_one_line(tmp_path):
    with pytest.raises(
        FairseqExtError, match=r"no CPython 3.12 at .*nowhere/python: install it .*PYTHON312="
    ):
        rehearse.find_python(str(tmp_path / "nowhere" / "python"))
    if sys.version_info[:2] != (3, 12):
        with pytest.raises(FairseqExtError, match="no CPython 3.12 at"):
            rehearse.find_python(sys.executable)
        proc = subprocess.run(
            [sys.executable, "-m", "reproduction.gpu.rehearse", "run", "--wheels", str(tmp_path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 1 and proc.stdout == ""
        assert proc.stderr.splitlines() == [
            f"gpu-rehearsal: run needs the rehearsal's CPython 3.12, not "
            f"{sys.executable}: use `make gpu-rehearsal`"
        ]


def test_recorded_commands_hold_no_path_of_this_machine():
    cmd = [
        sys.executable,
        "-m",
        "reproduction.gpu.training",
        "--results",
        str(ROOT / "reproduction" / "gpu" / "results" / "rehearsal"),
    ]
    assert (
        rehearse.relative(cmd)
        == "python -m reproduction.gpu.training --results reproduction/gpu/results/rehearsal"
    )


def test_cpu_training_command_logs_often_enough_for_the_verdict(tmp_path):
    data = {"pairs": tmp_path / "pairs", "mono": tmp_path / "mono"}
    cmd = training.command(
        "unilm", "bf16", data, rehearse.UPDATES, tmp_path, rehearse.LOG_INTERVAL, cpu=True
    )
    assert cmd[-1] == "--cpu" and cmd[cmd.index("--log-interval") + 1] == "2"
    assert rehearse.UPDATES // rehearse.LOG_INTERVAL >= 6  # judge() needs 6 logged losses
    assert "--cpu" not in training.command("unilm", "bf16", data, 200, tmp_path)


def _record(passed=True):
    step = {"command": "python -m x", "returncode": 0 if passed else 1, "seconds": 1.0}
    return {
        "date": "2026-11-24",
        "hardware": "x86_64, 2 cores, no GPU",
        "wall_seconds": 600.0,
        "passed": passed,
        "versions": {
            "python": "3.12.1",
            "torch": "2.11.0+cu130",
            "numpy": "2.5.2",
            "transformers": "5.17.0",
            "fairseq": "0.12.2",
            "cuda": False,
        },
        "wheels": ["a.whl", "b.whl"],
        "install": {"passed": True, "seconds": 4.0},
        "suite": {**step, "tests": 10, "passed_count": 8, "failures": 0, "errors": 0, "skipped": 2},
        "train": {
            **step,
            "runs": [
                {
                    "arch": "prophetnet_base",
                    "precision": "bf16",
                    "updates": 12,
                    "loss_first3": 12.5,
                    "loss_last3": 10.1,
                    "seconds": 250.0,
                    "passed": passed,
                    "failed_checks": [] if passed else ["loss decreasing"],
                }
            ],
        },
        "throughput": step,
        "bench": step,
    }


def test_table_names_every_step_and_each_failure():
    good = rehearse.render(_record())
    assert "numpy 2.5.2" in good and "every step passed" in good and "10 minutes" in good
    assert "| suite | `python -m x` | ok: 8 passed, 0 failed, 2 skipped | 1.0 |" in good
    assert "| `prophetnet_base` | 12 | 12.500 -> 10.100 | 250.0 | ok |" in good
    bad = rehearse.render(_record(passed=False))
    assert (
        "NOT every step passed" in bad
        and "FAILED (exit 1)" in bad
        and "FAILED: loss decreasing" in bad
    )
    no_bench = _record()
    del no_bench["bench"]
    assert "| bench | | not run | |" in rehearse.render(no_bench)


def test_publish_writes_between_the_markers_only(tmp_path):
    page, published = tmp_path / "gpu.md", tmp_path / "rehearsal.json"
    page.write_text(f"before\n{rehearse.START}\nold\n{rehearse.END}\nafter\n")
    rehearse.publish(_record(), page, published)
    text = page.read_text()
    assert text.startswith(f"before\n{rehearse.START}\n") and text.endswith(
        f"{rehearse.END}\nafter\n"
    )
    assert "old" not in text and rehearse.render(_record()) in text
    assert json.loads(published.read_text())["versions"]["numpy"] == "2.5.2"
    page.write_text("no markers\n")
    with pytest.raises(FairseqExtError, match="needs one <!-- gpu-rehearsal:start --> line"):
        rehearse.publish(_record(), page, published)


def test_published_table_is_the_one_its_record_renders():
    record = json.loads(rehearse.PUBLISHED.read_text())
    page = rehearse.PAGE.read_text(encoding="utf-8")
    assert f"{rehearse.START}\n{rehearse.render(record)}{rehearse.END}" in page
    assert str(ROOT) not in rehearse.PUBLISHED.read_text()


def test_recorded_commands_name_moved_tests_where_they_are_today():
    """A test file moved from tests/ to reproduction/tests/ since the rehearsal is named at its
    new path on the page; paths that exist, and other words, are left as recorded."""
    from reproduction.gpu.rehearse import _with_todays_test_paths

    assert _with_todays_test_paths("pytest tests --deselect tests/test_gpu_rehearsal.py::t") == (
        "pytest tests --deselect reproduction/tests/test_gpu_rehearsal.py::t",
        True,
    )
    assert _with_todays_test_paths("pytest tests/test_docs.py x/tests/test_gpu_rehearsal.py") == (
        "pytest tests/test_docs.py x/tests/test_gpu_rehearsal.py",
        False,
    )

"""Every data script answers ``--help`` with its usage and exit 0, through the dispatcher
(``python -m fairseq_ext.data_prep NAME --help``; its ``__main__.py`` of this checkout) and
run directly; an unknown option of a shell script is one line that points at ``--help``."""

import subprocess
import sys

import pytest

from data_prep.__main__ import HELPERS, scripts
from tests.conftest import ROOT, cli_env

DISPATCHER = [sys.executable, str(ROOT / "data_prep" / "__main__.py")]


def usage(name: str) -> str:
    return f"usage: {name}.py" if scripts()[name].suffix == ".py" else f"data_prep/{name}.sh"


@pytest.mark.parametrize("name", sorted(scripts()))
def test_every_data_script_answers_help(name):
    proc = subprocess.run(
        DISPATCHER + [name, "--help"], capture_output=True, text=True, env=cli_env()
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert usage(name) in proc.stdout and "--" in proc.stdout


def test_helpers_are_not_listed_as_scripts():
    proc = subprocess.run(DISPATCHER, capture_output=True, text=True, env=cli_env())
    assert proc.returncode == 0 and "multi30k" in proc.stdout
    assert HELPERS and not any(h in proc.stdout for h in HELPERS)


def test_shell_script_help_among_other_options_and_unknown_option():
    script = str(ROOT / "data_prep" / "multi30k.sh")
    helped = subprocess.run(
        ["bash", script, "--out", "x", "-h"], capture_output=True, text=True, env=cli_env()
    )
    assert helped.returncode == 0 and "--local DIR" in helped.stdout and helped.stderr == ""
    unknown = subprocess.run(
        ["bash", script, "--bogus"], capture_output=True, text=True, env=cli_env()
    )
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert unknown.stderr == f"error: unknown option --bogus (see: bash {script} --help)\n"


def test_the_dispatcher_runs_from_a_clone_root_without_an_install():
    """``python -m fairseq_ext.data_prep NAME --help`` in a clone's root, by an interpreter that has
    no install of the plugin (``-S``: no site-packages, so no editable install either): the clone's
    ``fairseq_ext`` is the one imported, and its ``data_prep`` is the clone's data_prep/."""
    for argv, expected in (
        (["multi30k", "--help"], "data_prep/multi30k.sh [--local DIR]"),
        ([], "wordpiece"),
    ):
        proc = subprocess.run(
            [sys.executable, "-S", "-m", "fairseq_ext.data_prep", *argv],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={"PATH": cli_env()["PATH"]},
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert expected in proc.stdout
    assert (
        ROOT / "fairseq_ext" / "data_prep" / "__main__.py"
    ).resolve() == ROOT / "data_prep" / "__main__.py"

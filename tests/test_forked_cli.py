"""tests.forked_cli against fresh processes: a forked fairseq command gives the same exit
status, standard output and error lines as the same command started from its console script."""
import subprocess

import pytest

from tests.conftest import USER_DIR, cli_env, run


def _fresh(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=cli_env(), **kw)


def _meaningful(text):
    """The lines without the time stamps of log lines and without a traceback's frames (a forked
    command's start at tests/forked_cli.py, a fresh one's at its console script); the traceback's
    first and last lines, the exception, stay."""
    return [line.split(" | ", 1)[-1] for line in text.splitlines() if not line.startswith(" ")]


@pytest.mark.parametrize("cmd", [
    ["fairseq-generate", "--help"],
    ["fairseq-train", "/nonexistent/data-bin", "--user-dir", USER_DIR, "--task", "cmlm_hybrid", "--arch",
     "hi_cmlm_transformer_tiny", "--criterion", "nat_loss", "--max-tokens", "100"],
    ["fairseq-preprocess", "--only-source", "--trainpref", "/nonexistent/train", "--destdir", "unused"],
])
def test_forked_command_equals_a_fresh_process(cmd, tmp_path):
    forked = run(cmd, check=False, cwd=tmp_path)
    fresh = _fresh(cmd, cwd=tmp_path)
    assert forked.returncode == fresh.returncode
    assert _meaningful(forked.stdout) == _meaningful(fresh.stdout)
    assert _meaningful(forked.stderr) == _meaningful(fresh.stderr)


def test_forked_command_reads_standard_input(tmp_path):
    """fairseq-interactive's refusal without a checkpoint, and stdin handed over (no hang)."""
    cmd = ["fairseq-interactive", str(tmp_path), "--path", str(tmp_path / "missing.pt"), "--user-dir", USER_DIR]
    forked = run(cmd, check=False, input="hello\n", timeout=120)
    fresh = _fresh(cmd, input="hello\n", timeout=120)
    assert forked.returncode == fresh.returncode != 0
    assert _meaningful(forked.stderr) == _meaningful(fresh.stderr)

"""tests.forked_cli against fresh processes: a forked fairseq command (or Python program) gives the
same exit status, standard output and error lines as the same command started afresh."""

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import USER_DIR, forking_server, run, script_env


def _fresh(cmd, **kw):
    return run(cmd, check=False, fresh=True, **kw)


def _meaningful(text):
    """The lines without the time stamps of log lines and without a traceback's frames (a forked
    command's start at tests/forked_cli.py, a fresh one's at its console script); the traceback's
    first and last lines, the exception, stay."""
    return [line.split(" | ", 1)[-1] for line in text.splitlines() if not line.startswith(" ")]


@pytest.mark.parametrize(
    "cmd",
    [
        ["fairseq-generate", "--help"],
        [
            "fairseq-train",
            "/nonexistent/data-bin",
            "--user-dir",
            USER_DIR,
            "--task",
            "cmlm_hybrid",
            "--arch",
            "hi_cmlm_transformer_tiny",
            "--criterion",
            "nat_loss",
            "--max-tokens",
            "100",
        ],
        [
            "fairseq-preprocess",
            "--only-source",
            "--trainpref",
            "/nonexistent/train",
            "--destdir",
            "unused",
        ],
    ],
)
def test_forked_command_equals_a_fresh_process(cmd, tmp_path):
    forked = run(cmd, check=False, cwd=tmp_path)
    fresh = _fresh(cmd, cwd=tmp_path)
    assert forked.returncode == fresh.returncode
    assert _meaningful(forked.stdout) == _meaningful(fresh.stdout)
    assert _meaningful(forked.stderr) == _meaningful(fresh.stderr)


def test_forked_command_reads_standard_input(tmp_path):
    """fairseq-interactive's refusal without a checkpoint, and stdin handed over (no hang)."""
    cmd = [
        "fairseq-interactive",
        str(tmp_path),
        "--path",
        str(tmp_path / "missing.pt"),
        "--user-dir",
        USER_DIR,
    ]
    forked = run(cmd, check=False, input="hello\n", timeout=120)
    fresh = _fresh(cmd, input="hello\n", timeout=120)
    assert forked.returncode == fresh.returncode != 0
    assert _meaningful(forked.stderr) == _meaningful(fresh.stderr)


PROGRAM = """import os, sys
KEPT = open("kept.txt", "w")
KEPT.write("written, never closed")
print(os.getppid(), sys.path[0], sys.argv[1:], __name__, os.getcwd())
sys.exit("refused: " + sys.argv[1])
"""


def test_a_python_program_is_forked_with_the_interpreters_sys_path_and_argv(tmp_path):
    """``python FILE.py`` run by the server's child: the same exit status, standard error and
    ``sys.path[0]``, ``sys.argv``, ``__name__`` and working folder as a fresh interpreter, and a
    file left open is flushed; its parent is the server, also when a script calls it by name.
    ``python -m fairseq_ext.NAME`` likewise (its one-line refusal of a missing file), and
    ``python -c CODE`` and ``python -`` (the code on standard input, which it may read on)."""
    (tmp_path / "prog.py").write_text(PROGRAM)
    (tmp_path / "work").mkdir()
    cmd = [sys.executable, tmp_path / "prog.py", "a b", "--c"]
    forked, fresh = run(cmd, check=False, cwd=tmp_path / "work"), _fresh(cmd, cwd=tmp_path / "work")
    assert (
        forked.returncode == fresh.returncode == 1
        and forked.stderr == fresh.stderr == "refused: a b\n"
    )
    parent, rest = forked.stdout.split(" ", 1)
    assert (
        rest
        == fresh.stdout.split(" ", 1)[1]
        == f"{tmp_path} ['a b', '--c'] __main__ {tmp_path / 'work'}\n"
    )
    assert int(parent) == forking_server().server.pid != int(fresh.stdout.split()[0])
    assert (
        tmp_path / "work" / "kept.txt"
    ).read_text() == "written, never closed"  # flushed as at an exit
    # called by name from a script: the python stand-in forks FILE.py, -c and -, and runs the
    # interpreter for any other option (-I)
    parent = "import os; print(os.getppid())"
    script = [
        "bash",
        "-c",
        f"python {tmp_path / 'prog.py'} x; python -c '{parent}'; echo '{parent}' | python -; "
        f"python -I -c '{parent}'; echo $$",
    ]
    lines = subprocess.run(
        script, capture_output=True, text=True, env=script_env(), cwd=tmp_path / "work"
    ).stdout.split("\n")
    assert [int(x.split()[0]) for x in lines[:3]] == [forking_server().server.pid] * 3 and lines[
        3
    ] == lines[4]
    code = (
        "import os, sys; print(repr(sys.path[0]), sys.argv, __name__, __file__ if '__file__' in "
        "dir() else None, os.getcwd(), sys.stdin.read().split()); sys.exit('refused')"
    )
    for cmd, given in (
        ([sys.executable, "-c", code, "a b"], "x y"),
        ([sys.executable, "-", "a b"], code),
    ):
        forked, fresh = (
            run(cmd, check=False, cwd=tmp_path, input=given),
            _fresh(cmd, cwd=tmp_path, input=given),
        )
        assert (
            forked.returncode == fresh.returncode == 1
            and forked.stderr == fresh.stderr == "refused\n"
        )
        assert forked.stdout == fresh.stdout and f"{cmd[1]!r}, 'a b'] __main__ " in fresh.stdout
    module = [sys.executable, "-m", "fairseq_ext.checkpoints", "inspect", tmp_path / "missing.pt"]
    forked, fresh = run(module, check=False, cwd=tmp_path), _fresh(module, cwd=tmp_path)
    assert forked.returncode == fresh.returncode != 0 and "missing.pt" in fresh.stderr
    assert _meaningful(forked.stderr) == _meaningful(fresh.stderr) and forked.stdout == fresh.stdout


IMPORTS_FAIRSEQ = (
    "import logging\nlogging.getLogger('before').warning('one')\nimport fairseq.tasks\n"
    "logging.getLogger('after').info('two')\n"
)


@pytest.mark.parametrize(
    "first", ["", "import logging\nlogging.basicConfig(level=logging.WARNING)\n"]
)
def test_what_importing_fairseq_logs_comes_at_the_programs_first_import_of_it(first, tmp_path):
    """The server has imported fairseq; a child's first ``import fairseq...`` does what that import
    does in a fresh process (``logging.basicConfig``, its tensorboardX notice at INFO), between
    what the program logs before and after it; a program that set up logging first at WARNING
    shows neither the notice nor its own INFO line."""
    cmd = [sys.executable, "-c", first + IMPORTS_FAIRSEQ]
    forked, fresh = run(cmd, check=False, cwd=tmp_path), _fresh(cmd, cwd=tmp_path)
    assert forked.returncode == fresh.returncode == 0 and _meaningful(forked.stderr) == _meaningful(
        fresh.stderr
    )
    expected = (
        [
            "one",
            "INFO:fairseq.tasks.text_to_speech:Please install tensorboardX: pip install "
            "tensorboardX",
            "INFO:after:two",
        ]
        if not first
        else ["WARNING:before:one"]
    )
    assert _meaningful(fresh.stderr) == expected


# ---- a script's commands (tests.forked_cli.Zygote.script_env) ---------------------------------

FAILING_PREPROCESS = (
    "fairseq-preprocess --only-source --trainpref /nonexistent/train --destdir unused"
)


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def test_a_scripts_command_is_forked_unless_the_server_is_busy(tmp_path):
    """Called by name from bash, with the same exit status and lines as a fresh process; its
    traceback starts at tests/forked_cli.py, which shows it was forked. With the server busy
    (its lock held), or with fewer privileges than the server, the same call runs the real
    console script."""
    script = ["bash", "-c", f"{FAILING_PREPROCESS}; echo status $?"]
    fresh = _fresh(script, cwd=tmp_path)
    forked = subprocess.run(script, capture_output=True, text=True, env=script_env(), cwd=tmp_path)
    assert (
        forked.stdout == fresh.stdout
        and fresh.stdout.startswith("status ")
        and fresh.stdout != "status 0\n"
    )
    assert _meaningful(forked.stderr) == _meaningful(fresh.stderr) and "Traceback" in fresh.stderr
    assert "forked_cli.py" in forked.stderr and "forked_cli.py" not in fresh.stderr
    lock = os.open(forking_server().folder / "lock", os.O_RDWR)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        busy = subprocess.run(
            script, capture_output=True, text=True, env=script_env(), cwd=tmp_path
        )
    finally:
        os.close(lock)
    assert busy.stdout == fresh.stdout and "forked_cli.py" not in busy.stderr
    if shutil.which("setpriv"):  # with fewer privileges than the server: the real command too
        dropped = subprocess.run(
            ["setpriv", "--inh-caps=-dac_override", "--bounding-set=-dac_override", *script],
            capture_output=True,
            text=True,
            env=script_env(),
            cwd=tmp_path,
        )
        assert dropped.stdout == fresh.stdout and "forked_cli.py" not in dropped.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_stand_in_takes_its_forked_command_with_it(tmp_path, sig):
    """A forked fairseq-preprocess waits on a FIFO; killing its stand-in (SIGTERM, forwarded, or
    SIGKILL, seen by the server as a closed socket) ends the command too."""
    os.mkfifo(tmp_path / "train")
    server = forking_server().server.pid
    stand_in = subprocess.Popen(
        [
            "fairseq-preprocess",
            "--only-source",
            "--trainpref",
            str(tmp_path / "train"),
            "--destdir",
            str(tmp_path / "out"),
        ],
        env=script_env(),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not _children(server) and time.monotonic() < deadline:
        time.sleep(0.1)
    [command] = _children(server)
    time.sleep(1)  # let it reach the FIFO
    stand_in.send_signal(sig)
    assert stand_in.wait(timeout=60) == -sig
    while _children(server) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _children(server) and not Path(f"/proc/{command}").exists()

"""``--results-path`` of fairseq-generate with real concurrent processes: a second run given
the same folder refuses with one line naming the running one, and the first run's file is
complete; a run killed while writing leaves no half file under the final name (an earlier
complete file stays), and the next run cleans up after it; a full disk (a small tmpfs) is one
line, the earlier file kept. ``exclusive_output`` in process:
the same rules, for the files the plugin's tools write."""

import os
import signal
import socket
import subprocess
import time

import pytest

from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.fairseq_changes.output_files import _holder, exclusive_output
from tests.conftest import cli_env, generate_args, run
from tests.helpers.filesystems import tmpfs

DEADLINE_S = 300


def _start(args):
    return subprocess.Popen(
        [str(a) for a in args],
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(path, proc, holds_pid=True):
    """Until ``path`` exists and, with ``holds_pid``, holds the run's pid (the run holds the lock
    and has said so): bounded in time."""
    deadline = time.time() + DEADLINE_S
    while not (
        path.exists() and (not holds_pid or path.read_text().split()[:1] == [str(proc.pid)])
    ):
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.time() < deadline, "the run never opened its results file"
        time.sleep(0.05)


def _hypotheses(text):
    return [line for line in text.splitlines() if line.startswith("H-")]


def test_second_run_on_the_same_results_path_refuses_and_names_the_first(
    tiny_data, tiny_checkpoint, tmp_path
):
    results = tmp_path / "results"
    args = generate_args(tiny_data, tiny_checkpoint, "--results-path", results)
    first = _start(args)
    try:
        _wait_for(results / "generate-test.txt.lock", first)
        first.send_signal(signal.SIGSTOP)  # holds the file while the second run starts and ends
        second = run(args, check=False, timeout=DEADLINE_S)
        first.send_signal(signal.SIGCONT)
        out, err = first.communicate(timeout=DEADLINE_S)
    finally:
        if first.poll() is None:
            first.kill()
    assert second.returncode != 0
    assert (
        f"fairseq_ext: error: {results / 'generate-test.txt'} is being written by process "
        f"{first.pid} ("
    ) in second.stderr and "wait for it to end or give another --results-path" in second.stderr
    assert "Traceback" not in second.stderr
    assert first.returncode == 0, err[-2000:]
    assert sorted(os.listdir(results)) == ["generate-test.txt"]
    text = (results / "generate-test.txt").read_text(encoding="utf-8")
    assert len(_hypotheses(text)) == 21 and "Generate test with beam" in text.splitlines()[-1]
    assert all(line.count("\t") == 2 for line in _hypotheses(text))  # no line spliced from two runs


def test_killed_run_leaves_no_half_file_and_the_next_run_cleans_up(
    tiny_data, tiny_checkpoint, tmp_path
):
    results = tmp_path / "results"
    args = generate_args(tiny_data, tiny_checkpoint, "--results-path", results)
    run(args, timeout=DEADLINE_S)
    earlier = (results / "generate-test.txt").read_bytes()
    killed = _start(args)
    partial = results / f"generate-test.txt.partial-{killed.pid}"
    _wait_for(
        partial, killed, holds_pid=False
    )  # opened after the lock is taken: kill the run while it writes
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=DEADLINE_S)
    assert (
        results / "generate-test.txt"
    ).read_bytes() == earlier  # the complete earlier file, untouched
    assert partial.exists()
    again = run(args, timeout=DEADLINE_S)
    assert f"fairseq_ext: replaced the earlier {results / 'generate-test.txt'}" in again.stderr
    assert sorted(os.listdir(results)) == ["generate-test.txt"]
    assert _hypotheses((results / "generate-test.txt").read_text(encoding="utf-8")) == _hypotheses(
        earlier.decode()
    )


def test_exclusive_output_in_process(tmp_path):
    path = tmp_path / "out.txt"
    with exclusive_output(path, encoding="utf-8") as f:
        f.write("a\n")
        assert not path.exists() and sorted(os.listdir(tmp_path)) == [
            "out.txt.lock",
            f"out.txt.partial-{os.getpid()}",
        ]
        with pytest.raises(
            FairseqExtError, match=f"out.txt is being written by process {os.getpid()}"
        ):
            exclusive_output(path)
    assert path.read_text() == "a\n" and sorted(os.listdir(tmp_path)) == ["out.txt"]
    with pytest.raises(ValueError, match="stopped"):
        with exclusive_output(path, encoding="utf-8") as f:
            f.write("half")
            raise ValueError("stopped")
    assert path.read_text() == "a\n" and sorted(os.listdir(tmp_path)) == ["out.txt"]


def test_full_disk_while_writing_results_keeps_the_earlier_file(
    tiny_data, tiny_checkpoint, tmp_path
):
    """A real full disk: the results folder on a 1 MiB tmpfs, filled up after a first complete run
    (8 KiB left: the text fills it midway; then nothing left: the lock cannot be written)."""
    with tmpfs(tmp_path / "disk", 1024) as disk:
        results = disk / "results"
        args = generate_args(tiny_data, tiny_checkpoint, "--results-path", results)
        run(args)
        first = (results / "generate-test.txt").read_text()
        assert len(first.encode()) > 4096  # more than the page left for it
        for name, leave_kib in (
            ("filler", 8),
            ("filler2", 0),
        ):  # a page for the lock, one of text; then none
            free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
            (disk / name).write_bytes(b"\0" * (free - leave_kib * 1024))
            proc = run(args, check=False)
            assert proc.returncode != 0
            assert proc.stderr.splitlines()[-1] == (
                "fairseq_ext: error: no space left on the device while writing "
                f"{results / 'generate-test.txt'}; the earlier complete "
                f"{results / 'generate-test.txt'} is kept. Free space there (or give another "
                "--results-path) and run the same command again"
            )
            assert "Traceback" not in proc.stderr
            assert os.listdir(results) == ["generate-test.txt"]
            assert (results / "generate-test.txt").read_text() == first


def test_a_lock_without_a_pid_yet_names_another_process(tmp_path):
    """Between taking the lock and writing its pid the holder's lock file is empty: the message
    says 'another process' (an empty pid would read /proc//cmdline, the kernel's command line)."""
    lock = tmp_path / "out.txt.lock"
    lock.write_text("")
    assert _holder(str(lock)) == "another process"
    lock.write_text(str(os.getpid()))
    assert _holder(str(lock)).startswith(f"process {os.getpid()} (") and "python" in _holder(
        str(lock)
    )
    lock.write_text(f"{os.getpid()} {socket.gethostname()} 2026-12-02 06:53:11 UTC\n")
    assert _holder(str(lock)).endswith(
        f") on {socket.gethostname()}, started 2026-12-02 06:53:11 UTC"
    )

"""fairseq's command lines for the tests, forked from a process that has imported their
libraries once.

Starting ``fairseq-train`` costs about 4.5 s on this project's CPUs before it reads its first
option, 3 s of it importing torch and the libraries fairseq imports (scikit-learn and SciPy
through its sentence-prediction criterion, Hydra, sacreBLEU, ...), and the suite starts
fairseq's command lines some hundred times. ``Zygote`` imports those libraries (``PRELOAD``)
once, in a server process started with the tests' environment, and answers each request by
``os.fork()``: the child takes the request's working folder, environment, standard input and
output files and ``sys.argv``, imports the command's module and calls its entry point (the
function its console script calls). fairseq itself is imported in the child, in the order
the command imports it, so that its import-time effects (each command's logging set-up,
fairseq's own ``logging.basicConfig`` calls and notices, the plugin loaded by ``--user-dir``)
happen as in a fresh process; the server checks that its preloads leave the root logger alone.

What differs from a fresh process: the traceback of an error that reaches the interpreter
starts at this module's frame, not the console script's (the exception and its message are
the same); and ``OMP_NUM_THREADS``, read when torch loads, is the server's (the tests' one
thread) unless the request asks for another, which the child then sets with
``torch.set_num_threads``. ``tests/test_forked_cli.py`` holds the rest to fresh processes.

    python -m tests.forked_cli   (the server; ``Zygote`` starts it)
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

# the console scripts of fairseq's setup.py -> "module:function"
ENTRY_POINTS = {
    "fairseq-train": "fairseq_cli.train:cli_main",
    "fairseq-generate": "fairseq_cli.generate:cli_main",
    "fairseq-preprocess": "fairseq_cli.preprocess:cli_main",
    "fairseq-interactive": "fairseq_cli.interactive:cli_main",
    "fairseq-validate": "fairseq_cli.validate:cli_main",
}


# what every command imports before fairseq, with no effect on logging (checked at start-up);
# torch._dynamo is what fairseq-train's first torch optimizer imports (about 1 s of CPU)
PRELOAD = ("torch", "torch.distributed", "torch.utils.data", "torch._dynamo", "numpy", "scipy.stats", "sklearn.metrics",
           "omegaconf", "hydra", "sentencepiece", "sacrebleu", "regex", "bitarray")


def _entry(command: str):
    module, function = ENTRY_POINTS[command].split(":")
    return getattr(__import__(module, fromlist=[function]), function)


def _child(request: dict) -> None:
    """In the forked child: become the command, then leave with its exit status."""
    code = 1
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        for fd, (path, mode) in enumerate([(request["stdin"], os.O_RDONLY),
                                           (request["stdout"], os.O_WRONLY | os.O_TRUNC | os.O_CREAT),
                                           (request["stderr"], os.O_WRONLY | os.O_TRUNC | os.O_CREAT)]):
            opened = os.open(path, mode, 0o644)
            os.dup2(opened, fd)
            os.close(opened)
        sys.stdin = open(0, closefd=False)
        threads = request["env"].get("OMP_NUM_THREADS")
        if threads and threads.isdigit():
            import torch

            torch.set_num_threads(int(threads))
        sys.argv = [request["argv0"], *request["args"]]
        try:
            _entry(request["command"])()
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
            if not isinstance(stop.code, (int, type(None))):
                print(stop.code, file=sys.stderr)
        except BaseException:  # as the interpreter does: the excepthook (the plugin's, if loaded), then 1
            sys.excepthook(*sys.exc_info())
            code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def serve(requests, answers) -> None:
    """Import ``PRELOAD``, then fork one child per request line; answer its pid, then its status."""
    import importlib
    import logging

    for module in PRELOAD:
        importlib.import_module(module)
    root = logging.getLogger()
    if root.handlers or root.level != logging.WARNING:
        raise RuntimeError(f"a preloaded library configured logging: {root.handlers}, level {root.level}")
    answers.write("ready\n")
    answers.flush()
    for line in requests:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(request)
        answers.write(f"{pid}\n")
        answers.flush()
        _, status = os.waitpid(pid, 0)
        answers.write(f"{os.waitstatus_to_exitcode(status)}\n")
        answers.flush()


class Zygote:
    """A server (``python -m tests.forked_cli``) that forks fairseq's commands; one per test worker."""

    def __init__(self, env: dict, root: Path):
        self.root = root
        self.server = subprocess.Popen([sys.executable, "-m", "tests.forked_cli"], cwd=root, env=env,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        ready = self._line(None)
        if ready != "ready":
            raise RuntimeError(f"tests.forked_cli did not start: {ready!r}")

    def run(self, cmd: list[str], env: dict, scratch: Path, cwd=None, input: str | None = None,
            timeout: float | None = None) -> subprocess.CompletedProcess:
        scratch.mkdir(parents=True, exist_ok=True)
        files = {name: scratch / name for name in ("stdin", "stdout", "stderr")}
        files["stdin"].write_text(input or "", encoding="utf-8")
        command = os.path.basename(cmd[0])
        request = {"command": command, "argv0": cmd[0], "args": [str(c) for c in cmd[1:]], "env": env,
                   "cwd": str(cwd or os.getcwd()), **{k: str(v) for k, v in files.items()}}
        self.server.stdin.write((json.dumps(request) + "\n").encode())
        pid = int(self._line(None))
        try:
            status = int(self._line(timeout))
        except subprocess.TimeoutExpired:
            os.kill(pid, 9)
            self._line(None)
            raise subprocess.TimeoutExpired(cmd, timeout)
        read = {k: files[k].read_text(encoding="utf-8", errors="replace") for k in ("stdout", "stderr")}
        return subprocess.CompletedProcess(cmd, status, read["stdout"], read["stderr"])

    def _line(self, timeout: float | None) -> str:
        """The server's next answer line, read unbuffered (so that a timeout sees what is pending)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        fd, line = self.server.stdout.fileno(), b""
        while not line.endswith(b"\n"):
            if deadline is not None and not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                raise subprocess.TimeoutExpired("fairseq", timeout)
            byte = os.read(fd, 1)
            if not byte:
                raise RuntimeError("tests.forked_cli stopped")
            line += byte
        return line.decode().strip()

    def close(self) -> None:
        self.server.stdin.close()
        self.server.wait(timeout=30)


if __name__ == "__main__":
    # the protocol runs on duplicates of the server's own stdin/stdout; fd 0-2 are the children's
    requests = os.fdopen(os.dup(0), "r")
    answers = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    serve(requests, answers)

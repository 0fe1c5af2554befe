"""fairseq's command lines for the tests, forked from a process that has imported their
libraries once.

Starting ``fairseq-train`` costs about 4.5 s on this project's CPUs before it reads its first
option, 3 s of it importing torch and the libraries fairseq imports (scikit-learn and SciPy
through its sentence-prediction criterion, Hydra, sacreBLEU, ...), and the suite starts
fairseq's command lines some hundred times. ``Zygote`` imports those libraries (``PRELOAD``)
once, in a server process started with the tests' environment, and answers each request by
``os.fork()``: the child takes the request's working folder, environment, standard input and
output files and ``sys.argv``, imports the command's module and calls its entry point (the
function its console script calls); the server checks that its preloads leave the root logger
alone. fairseq itself (``FAIRSEQ``) is imported by the server too, but what its import does to
logging (three of its modules call ``logging.basicConfig``, the first at DEBUG; one logs a notice)
is recorded there and undone, and the child replays it at its own first ``import fairseq...``, where
a fresh process would do it: after the command's own logging set-up (each command configures logging
before it imports fairseq) and before anything else the command logs. The command's module and the
plugin (loaded by ``--user-dir``) are imported in the child.

What differs from a fresh process: the traceback of an error that reaches the interpreter
starts at this module's frame, not the console script's (the exception and its message are
the same); and ``OMP_NUM_THREADS``, read when torch loads, is the server's (the tests' one
thread) unless the request asks for another, which the child then sets with
``torch.set_num_threads``; a first import of fairseq by ``importlib.import_module`` rather than an
import statement does not trigger the replay (no command imports fairseq first that way).
The child runs the ``atexit`` handlers when the command ends, as the interpreter's exit would
(``fairseq-train`` removes its ``--save-dir`` lock in one). ``tests/test_forked_cli.py`` holds the
rest to fresh processes.

Python programs that the tests start (``run``) as ``python -m fairseq_ext.NAME``, ``python
FILE.py``, ``python -c CODE`` or ``python -`` (the program on standard input) are forked the same
way (``python_program``): the child puts on ``sys.path[0]`` what the interpreter would (the working
folder, the file's folder, or ``''``) and runs the module, file or code as ``__main__``, then
collects its objects and runs the ``atexit`` handlers, as the interpreter's exit would. What differs
from a fresh interpreter: ``sys.modules`` holds the preloads (torch, the libraries above and
fairseq, nothing of the plugin), so a test that needs a first import in a process of its own starts
one.

Scripts that call the commands by name (the recipes of ``examples/``) reach the same server
through ``Zygote.script_env``: a folder of stand-ins named like the console scripts, first on
``PATH``, each a stdlib-only Python that hands the server its arguments, environment, working
folder and its own standard input, output and error (their file descriptors, over a Unix
socket), forwards the signals it receives to the forked command and leaves with its exit
status; a ``python`` stand-in does so for the Python programs above and runs the interpreter for
any other. One command at a time is forked; a stand-in that finds the server busy for longer than
``BUSY_GRACE`` (the ranks of a distributed run started side by side, or a command started by a
forked one; not the stand-in of the command before it, still collecting its exit status), or that
runs with other privileges than the server (``setpriv``), runs the real console script instead.

    python -m tests.forked_cli FOLDER   (the server; ``Zygote`` starts it)
"""

from __future__ import annotations

import atexit
import fcntl
import gc
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
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
# torch._dynamo is what fairseq-train's first torch optimizer imports (about 1 s of CPU), and
# rouge_score's scorer what the plugin imports for --eval-rouge (NLTK with it, about 0.6 s)
PRELOAD = (
    "torch",
    "torch.distributed",
    "torch.utils.data",
    "torch._dynamo",
    "numpy",
    "scipy.stats",
    "sklearn.metrics",
    "omegaconf",
    "hydra",
    "sentencepiece",
    "sacrebleu",
    "regex",
    "bitarray",
    "rouge_score.rouge_scorer",
)


# fairseq and the modules its commands import from it (about 1.5 s of CPU a command)
FAIRSEQ = (
    "fairseq",
    "fairseq.checkpoint_utils",
    "fairseq.options",
    "fairseq.trainer",
    "fairseq.binarizer",
    "fairseq.sequence_generator",
    "fairseq.dataclass.utils",
    "fairseq.logging.progress_bar",
)


# A fairseq command that a forked program starts finds the server busy and starts afresh (the same
# result, only slower): forked are the plugin's modules, which start none, and files outside
# data_prep/, whose binarizing scripts call fairseq-preprocess.
UNFORKED_FOLDER = Path(__file__).resolve().parents[1] / "data_prep"


def python_program(cmd: list[str]) -> tuple[list[str], list[str]] | None:
    """``(["module", NAME], ARGS)`` for ``python -m fairseq_ext.NAME ARGS``, ``(["path", FILE],
    ARGS)`` for ``python FILE.py ARGS`` (FILE outside ``UNFORKED_FOLDER``), ``(["code", CODE],
    ARGS)`` for ``python -c CODE ARGS``, ``(["stdin", "<stdin>"], ARGS)`` for ``python - ARGS``,
    None for any other command (other options included). ARGS is what the program reads as
    ``sys.argv[1:]``."""
    if not cmd or cmd[0] != sys.executable:
        return None
    if len(cmd) >= 3 and cmd[1] == "-m" and cmd[2].startswith("fairseq_ext."):
        return ["module", cmd[2]], cmd[3:]
    if len(cmd) >= 3 and cmd[1] == "-c":
        return ["code", cmd[2]], cmd[3:]
    if len(cmd) >= 2 and cmd[1] == "-":
        return ["stdin", "<stdin>"], cmd[2:]
    if (
        len(cmd) >= 2
        and cmd[1].endswith(".py")
        and UNFORKED_FOLDER not in Path(cmd[1]).resolve().parents
    ):
        return ["path", os.path.abspath(cmd[1])], cmd[2:]
    return None


def _run_program(kind: str, target: str) -> None:
    """``python -m TARGET``, ``python TARGET``, ``python -c TARGET`` or ``python -`` in this
    (forked) process; ``sys.argv[1:]`` is set."""
    import runpy
    import types

    if kind == "module":
        sys.path[0] = os.getcwd()
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    elif kind == "path":
        sys.path[0] = os.path.dirname(target)
        runpy.run_path(target, run_name="__main__")
    else:  # as the interpreter runs -c CODE and a program read from standard input
        code, name = (target, "<string>") if kind == "code" else (sys.stdin.read(), target)
        sys.path[0], sys.argv[0] = "", "-c" if kind == "code" else "-"
        main = sys.modules["__main__"] = types.ModuleType("__main__")
        if kind == "stdin":
            main.__file__ = name
        exec(compile(code, name, "exec"), main.__dict__)


def _import_recording_logging(modules) -> list[tuple]:
    """Import ``modules`` and return what the import did to logging, in order: ``("basicConfig",
    (args, kwargs))`` for each call, ``("record", (logger, record))`` for each record logged,
    whatever its level (the child decides with its own levels); then undo it (the root logger as
    before)."""
    import importlib
    import logging

    events = []
    basic, handle, enabled = logging.basicConfig, logging.Logger.handle, logging.Logger.isEnabledFor
    logging.basicConfig = lambda *args, **kwargs: (
        events.append(("basicConfig", (args, kwargs))) or basic(*args, **kwargs)
    )
    logging.Logger.handle = lambda logger, record: events.append(("record", (logger, record)))
    logging.Logger.isEnabledFor = lambda logger, level: True
    try:
        for module in modules:
            importlib.import_module(module)
    finally:
        logging.basicConfig, logging.Logger.handle, logging.Logger.isEnabledFor = (
            basic,
            handle,
            enabled,
        )
        root = logging.getLogger()
        for handler in list(root.handlers):
            root.removeHandler(handler)
        root.setLevel(logging.WARNING)
    return events


def _replay_at_first_fairseq_import(events: list[tuple]) -> None:
    """In the child: when the first ``import fairseq...`` statement returns, do what that import
    did to logging in a fresh process (``_import_recording_logging``'s events, with this
    process's levels, handlers, time and pid)."""
    import builtins
    import logging

    real = builtins.__import__

    def importing(name, globals=None, locals=None, fromlist=(), level=0):
        module = real(name, globals, locals, fromlist, level)
        if builtins.__import__ is importing and level == 0 and name.split(".")[0] == "fairseq":
            builtins.__import__ = real
            for kind, event in events:
                if kind == "basicConfig":
                    args, kwargs = event
                    logging.basicConfig(*args, **kwargs)
                    continue
                logger, record = event
                if logger.isEnabledFor(record.levelno):
                    record.created = time.time()
                    record.msecs = int((record.created - int(record.created)) * 1000) + 0.0
                    record.process = os.getpid()
                    logger.handle(record)
        return module

    builtins.__import__ = importing


def _entry(command: str):
    module, function = ENTRY_POINTS[command].split(":")
    return getattr(__import__(module, fromlist=[function]), function)


def _child(request: dict, fairseq_logging: list[tuple], streams: list[int] | None = None) -> None:
    """In the forked child: become the command, then leave with its exit status. Its standard
    streams are ``streams`` (a stand-in's descriptors) or the request's files; ``fairseq_logging``
    is what importing fairseq did to logging in the server (``_import_recording_logging``)."""
    code = 1
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        if streams is None:
            streams = [
                os.open(request["stdin"], os.O_RDONLY),
                os.open(request["stdout"], os.O_WRONLY | os.O_TRUNC | os.O_CREAT, 0o644),
                os.open(request["stderr"], os.O_WRONLY | os.O_TRUNC | os.O_CREAT, 0o644),
            ]
        for fd, opened in enumerate(streams):
            os.dup2(opened, fd)
            os.close(opened)
        sys.stdin = open(0, closefd=False)
        threads = request["env"].get("OMP_NUM_THREADS")
        if threads and threads.isdigit():
            import torch

            torch.set_num_threads(int(threads))
        sys.argv = [request["argv0"], *request["args"]]
        _replay_at_first_fairseq_import(fairseq_logging)
        try:
            if request.get("program"):
                _run_program(*request["program"])
            else:
                _entry(request["command"])()
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
            if not isinstance(stop.code, (int, type(None))):
                print(stop.code, file=sys.stderr)
        except (
            BaseException
        ):  # as the interpreter does: the excepthook (the plugin's, if loaded), then 1
            sys.excepthook(*sys.exc_info())
            code = 1
    finally:
        # what the interpreter's exit does: a program's objects, then (any command) atexit handlers
        try:
            if request.get("program"):
                gc.collect()
            atexit._run_exitfuncs()
        except BaseException:
            pass
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def _serve_stand_in(listener: socket.socket, fairseq_logging: list[tuple]) -> None:
    """Fork the command a stand-in sent (one JSON line and its three descriptors); answer its pid,
    then its status. A stand-in that goes away first (killed) takes its command with it."""
    conn, _ = listener.accept()
    with conn:
        data, streams = b"", []
        while not data.endswith(b"\n"):
            chunk, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
            data, streams = data + chunk, streams + list(fds)
            if not chunk:
                break
        if len(streams) != 3 or not data.endswith(b"\n"):
            for fd in streams:
                os.close(fd)
            return
        pid = os.fork()
        if pid == 0:
            listener.close()
            conn.close()
            _child(json.loads(data), fairseq_logging, streams)
        for fd in streams:
            os.close(fd)
        conn.sendall(f"{pid}\n".encode())
        done = os.pidfd_open(pid)
        if done not in select.select([done, conn], [], [])[0] and not conn.recv(1):
            os.kill(pid, signal.SIGKILL)
        os.close(done)
        _, status = os.waitpid(pid, 0)
        try:
            conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
        except OSError:
            pass


def serve(requests, answers, folder: Path) -> None:
    """Import ``PRELOAD``, then fork one child per request, from the pipe (the test worker: one
    line, answered with the pid, then the status) or from a stand-in (``stand_in``)."""
    import importlib
    import logging

    for module in PRELOAD:
        importlib.import_module(module)
    root = logging.getLogger()
    if root.handlers or root.level != logging.WARNING:
        raise RuntimeError(
            f"a preloaded library configured logging: {root.handlers}, level {root.level}"
        )
    fairseq_logging = _import_recording_logging(FAIRSEQ)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(folder / "socket"))
    listener.listen(1)
    answers.write("ready\n")
    answers.flush()
    while True:
        if listener in select.select([requests, listener], [], [])[0]:
            _serve_stand_in(listener, fairseq_logging)
            continue
        line = requests.readline()
        if not line:
            return
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            listener.close()
            _child(request, fairseq_logging)
        answers.write(f"{pid}\n")
        answers.flush()
        _, status = os.waitpid(pid, 0)
        answers.write(f"{os.waitstatus_to_exitcode(status)}\n")
        answers.flush()


# How long a stand-in waits for a busy server before it runs the real command: a command that
# read its predecessor's output (`read X < <(python -c ...)`, `$(...)`) can start while that
# predecessor's stand-in is still collecting its exit status, a few milliseconds.
BUSY_GRACE = 1.0


def identity() -> str:
    """This process's users, groups and capabilities (``/proc/self/status``)."""
    keys = ("Uid:", "Gid:", "Groups:", "CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:")
    return "".join(line for line in open("/proc/self/status") if line.startswith(keys))


def stand_in(command: str, folder: str, real: str) -> None:
    """A console script's stand-in (``Zygote.script_env``): the command forked by the server in
    ``folder``, or ``real`` itself when the server is serving another command or has other
    privileges. The ``python`` stand-in forks the programs ``python_program`` names and runs the
    interpreter for anything else."""
    program, args = (
        (python_program([sys.executable, *sys.argv[1:]]) or (None, None))
        if command == "python"
        else (None, sys.argv[1:])
    )
    if args is None:
        os.execv(real, [real, *sys.argv[1:]])
    lock = os.open(
        os.path.join(folder, "lock"), os.O_RDWR | os.O_CREAT, 0o644
    )  # held until the stand-in exits
    deadline = time.monotonic() + BUSY_GRACE
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.execv(real, [real, *sys.argv[1:]])
            time.sleep(0.01)
    with open(os.path.join(folder, "identity")) as server:
        if identity() != server.read():
            os.execv(real, [real, *sys.argv[1:]])
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(os.path.join(folder, "socket"))
    request = {
        "command": command,
        "program": program,
        "argv0": real,
        "args": args,
        "env": dict(os.environ),
        "cwd": os.getcwd(),
    }
    socket.send_fds(conn, [(json.dumps(request) + "\n").encode()], [0, 1, 2])
    answers = conn.makefile("r")
    pid = int(answers.readline())
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda number, frame: os.kill(pid, number))
    status = answers.readline().strip()
    if not status:
        sys.exit(f"{command}: tests.forked_cli stopped")
    if int(status) < 0:  # killed by a signal: so is the stand-in
        signal.signal(-int(status), signal.SIG_DFL)
        os.kill(os.getpid(), -int(status))
    sys.exit(int(status))


class Zygote:
    """A server (``python -m tests.forked_cli``) that forks fairseq's commands and Python programs;
    one per test worker."""

    def __init__(self, env: dict, root: Path):
        self.root = root
        self.folder = Path(
            tempfile.mkdtemp(prefix="forked-cli-")
        )  # the socket, the lock, the stand-ins
        self.server = subprocess.Popen(
            [sys.executable, "-m", "tests.forked_cli", str(self.folder)],
            cwd=root,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
        )
        ready = self._line(None)
        if ready != "ready":
            raise RuntimeError(f"tests.forked_cli did not start: {ready!r}")
        self.lock = os.open(self.folder / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        (self.folder / "identity").write_text(identity())  # the server's, which it inherited
        (self.folder / "bin").mkdir()
        real = Path(sys.executable).parent  # the console scripts
        for command in [*ENTRY_POINTS, "python"]:
            path = self.folder / "bin" / command
            path.write_text(
                f"#!{sys.executable} -S\nimport sys\nsys.path.insert(0, {str(root)!r})\n"
                f"from tests.forked_cli import stand_in\n"
                f"stand_in({command!r}, {str(self.folder)!r}, {str(real / command)!r})\n"
            )
            path.chmod(0o755)

    def script_env(self, env: dict) -> dict:
        """``env`` with the stand-ins first on ``PATH``: a script's fairseq commands are forked
        here."""
        return {**env, "PATH": str(self.folder / "bin") + os.pathsep + env["PATH"]}

    def run(
        self,
        cmd: list[str],
        env: dict,
        scratch: Path,
        cwd=None,
        input: str | None = None,
        timeout: float | None = None,
    ) -> subprocess.CompletedProcess:
        scratch.mkdir(parents=True, exist_ok=True)
        files = {name: scratch / name for name in ("stdin", "stdout", "stderr")}
        files["stdin"].write_text(input or "", encoding="utf-8")
        program, args = python_program(cmd) or (None, cmd[1:])
        request = {
            "command": os.path.basename(cmd[0]),
            "program": program,
            "argv0": cmd[0],
            "args": args,
            "env": env,
            "cwd": str(cwd or os.getcwd()),
            **{k: str(v) for k, v in files.items()},
        }
        fcntl.flock(self.lock, fcntl.LOCK_EX)  # a stand-in started meanwhile runs its real command
        try:
            self.server.stdin.write((json.dumps(request) + "\n").encode())
            pid = int(self._line(None))
            try:
                status = int(self._line(timeout))
            except subprocess.TimeoutExpired:
                os.kill(pid, 9)
                self._line(None)
                raise subprocess.TimeoutExpired(cmd, timeout)
        finally:
            fcntl.flock(self.lock, fcntl.LOCK_UN)
        read = {
            k: files[k].read_text(encoding="utf-8", errors="replace") for k in ("stdout", "stderr")
        }
        return subprocess.CompletedProcess(cmd, status, read["stdout"], read["stderr"])

    def _line(self, timeout: float | None) -> str:
        """The server's next answer line, read unbuffered (so that a timeout sees what is
        pending)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        fd, line = self.server.stdout.fileno(), b""
        while not line.endswith(b"\n"):
            if (
                deadline is not None
                and not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]
            ):
                raise subprocess.TimeoutExpired("fairseq", timeout)
            byte = os.read(fd, 1)
            if not byte:
                raise RuntimeError("tests.forked_cli stopped")
            line += byte
        return line.decode().strip()

    def close(self) -> None:
        self.server.stdin.close()
        self.server.wait(timeout=30)
        self.server.stdout.close()
        os.close(self.lock)
        shutil.rmtree(self.folder, ignore_errors=True)


if __name__ == "__main__":
    # the protocol runs on duplicates of the server's own stdin/stdout; fd 0-2 are the children's
    requests = os.fdopen(os.dup(0), "r")
    answers = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    serve(requests, answers, Path(sys.argv[1]))

"""``make gpu-check``: prove and measure every family on one CUDA GPU (docs/gpu.md).

    python -m reproduction.gpu.check [--part all|tests,train,mfu,flex,bench] [--wheels
    reproduction/gpu/wheels] [--results DIR]
                        [--copy-to DIR] [--deadline-s SECONDS]

1. Without CUDA it stops at once with one line, before it installs anything; without the
   wheels of ``make gpu-wheels`` it names the folder or the missing wheels.
2. It installs those wheels with pip and no network into ``reproduction/gpu/site`` (``--no-index
   --no-deps --target``), beside the machine's own torch, and checks that fairseq and the
   plugin import.
3. It runs the parts asked for (``all``: the five in turn), each step in its own process:

   * ``tests``: the CUDA-marked tests, ``pytest -m cuda tests/test_cuda.py
     tests/test_flex_attention.py``;
   * ``train``: ``gpu.training``, a 200-update ``--fp16`` and ``--bf16`` run of every family;
   * ``mfu``: ``gpu.throughput``, training throughput and MFU of every family beside
     fairseq's models of the same size;
   * ``flex``: ``gpu.flex_vs_dense``, FlexAttention against the dense masked attention (UniLM's
     prefix mask, ProphetNet's n streams) at 128 / 512 / 1024 tokens: equal outputs, speed, memory;
   * ``bench``: ``make bench`` on the GPU (``python -m reproduction.benchmarks.run --device cuda``,
   one
     module at a time), which writes ``benchmarks/results/gpu.json``, ``speed.png`` beside it
     and the table of ``docs/results/speed.md``.

4. Everything goes to one results folder (default ``reproduction/gpu/results/<UTC time>-<parts>``):
the
   logs, ``summary.json`` and ``summary.md``, whose tables are printed last. ``--copy-to DIR``
   copies ``summary.md``, ``summary.json``, those three files of ``bench`` and
   ``results.tar.gz`` (the folder without its generated data) to DIR. ``--deadline-s`` bounds
   the whole call: a step still running then is stopped and reported as such, and the
   summary is still written.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from fairseq_ext.common.errors import FairseqExtError, require
from reproduction.gpu.cli import write_json
from reproduction.gpu.report import render
from reproduction.gpu.wheels import DEFAULT_FOLDER, require_wheels

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "reproduction" / "gpu" / "site"
PARTS = ("tests", "train", "mfu", "flex", "bench")
# what must import once the wheels are in: fairseq, its configuration stack, the metrics, the plugin
IMPORT_CHECK = (
    "import fairseq, hydra, omegaconf, bitarray, sacrebleu, sentencepiece, rouge_score; "
    "import fairseq_ext.plugin; fairseq_ext.plugin.load()"
)
# what `bench` publishes: benchmarks/results/gpu.json and speed.png, docs/results/speed.md
BENCH_FILES = ("gpu.json", "speed.png", "speed.md")
SUMMARY_MARGIN_S = 15  # kept back from --deadline-s for the summary and the copies


def require_cuda() -> dict:
    """The CUDA device of this Python, or one clear error (before anything is installed)."""
    try:
        import torch
    except ImportError:
        raise FairseqExtError(
            f"{sys.executable} cannot import torch: run gpu-check with the Python that "
            "holds torch with CUDA"
        ) from None
    require(
        torch.cuda.is_available(),
        "no CUDA device here (torch.cuda.is_available() is False): run "
        "`make gpu-check` on a machine with an NVIDIA GPU (docs/gpu.md)",
    )
    capability = ".".join(map(str, torch.cuda.get_device_capability(0)))
    return {
        "device": torch.cuda.get_device_name(0),
        "capability": capability,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": sys.version.split()[0],
    }


def environment() -> dict:
    """This process's environment with the installed wheels and the repository importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(SITE), str(ROOT), env.get("PYTHONPATH")) if p
    )
    env["PATH"] = os.pathsep.join((str(SITE / "bin"), env.get("PATH", "")))
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("PYTHONWARNINGS", "ignore")
    return env


class Steps:
    """Runs each step as a logged subprocess, within the call's deadline."""

    def __init__(self, results: Path, deadline: float | None):
        self.results, self.deadline = results, deadline
        self.env = environment()

    def remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.time() - SUMMARY_MARGIN_S

    def run(self, name: str, cmd: list[str]) -> dict:
        """``cmd`` with its output in ``<name>.log``: exit code (124 when stopped at the
        deadline), seconds, and the last lines of the log."""
        left = self.remaining()
        if left is not None and left <= 0:
            return {"returncode": None, "seconds": 0.0, "tail": "not run: the deadline had passed"}
        log = self.results / f"{name}.log"
        t0 = time.time()
        with open(log, "w") as out:
            # its own process group, so that a step stopped at the deadline takes its children along
            proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                env=self.env,
                start_new_session=True,
            )
            try:
                rc = proc.wait(timeout=left)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                rc = 124
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        return {
            "returncode": rc,
            "seconds": round(time.time() - t0, 1),
            "log": log.name,
            "tail": "\n".join(lines[-15:]),
        }


def install(wheels: list[Path], steps: Steps) -> dict:
    """pip-install the wheels into ``SITE`` without a network, then check the imports."""
    pip = steps.run(
        "install",
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-index",
            "--no-deps",
            "--no-compile",
            "--disable-pip-version-check",
            "--upgrade",
            "--target",
            str(SITE),
            *map(str, wheels),
        ],
    )
    if pip["returncode"] != 0:
        return {"passed": False, **pip}
    imports = steps.run("imports", [sys.executable, "-c", IMPORT_CHECK])
    sys.path.insert(0, str(SITE))  # for what this process imports itself (the benchmarks' list)
    return {"passed": imports["returncode"] == 0, "wheels": [w.name for w in wheels], **imports}


def junit_totals(path: Path) -> dict:
    """Counts and failures of a pytest ``--junitxml`` report."""
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    failed = []
    for case in suite.iter("testcase"):
        problem = case.find("failure")
        problem = problem if problem is not None else case.find("error")
        if problem is not None:
            message = (problem.get("message") or "").splitlines()
            failed.append(f"{case.get('name')}: {message[0] if message else problem.tag}"[:300])
    counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    return {
        **counts,
        "passed_count": counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"],
        "failed": failed,
    }


def run_tests(steps: Steps) -> dict:
    report = steps.results / "tests.xml"
    out = steps.run(
        "tests",
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-m",
            "cuda",
            "-p",
            "no:cacheprovider",
            "tests/test_cuda.py",
            "tests/test_flex_attention.py",
            f"--junitxml={report}",
        ],
    )
    if not report.exists():
        return {"passed": False, **out}
    totals = junit_totals(report)
    ok = out["returncode"] == 0 and totals["tests"] > 0 and not totals["skipped"]
    return {"passed": ok, **out, **totals}


def run_training(steps: Steps) -> dict:
    left = steps.remaining()
    cmd = [sys.executable, "-m", "reproduction.gpu.training", "--results", str(steps.results)]
    out = steps.run(
        "train", cmd + ([] if left is None else ["--deadline-s", str(max(1, int(left - 20)))])
    )
    runs_file = steps.results / "train.json"
    runs = json.loads(runs_file.read_text()) if runs_file.exists() else []
    return {"passed": out["returncode"] == 0 and bool(runs), "runs": runs, **out}


def run_mfu(steps: Steps) -> dict:
    out = steps.run(
        "throughput",
        [sys.executable, "-m", "reproduction.gpu.throughput", "--results", str(steps.results)],
    )
    measured = steps.results / "throughput.json"
    return {
        "passed": out["returncode"] == 0,
        **out,
        **(json.loads(measured.read_text()) if measured.exists() else {}),
    }


def run_flex(steps: Steps) -> dict:
    out = steps.run(
        "flex",
        [
            sys.executable,
            "-m",
            "reproduction.gpu.flex_vs_dense",
            "--results",
            str(steps.results / "flex"),
        ],
    )
    table = steps.results / "flex" / "flex_vs_dense.md"
    return {
        "passed": out["returncode"] == 0,
        **out,
        "table": table.read_text() if table.exists() else "",
    }


def run_benchmarks(steps: Steps) -> dict:
    """``make bench`` on CUDA, one benchmark module per step: ``benchmarks.run`` merges each
    module's results into gpu.json, so a step stopped at the deadline loses only its own. The
    gpu.json found in the tree is replaced, so that it holds this machine's numbers only; it,
    the figure and the page of the published table are copied to the results folder."""
    from reproduction.benchmarks.run import BENCHMARKS, RESULTS

    gpu_json = RESULTS / "gpu.json"
    gpu_json.unlink(missing_ok=True)
    modules = {
        name: steps.run(
            f"benchmarks-{name}",
            [
                sys.executable,
                "-m",
                "reproduction.benchmarks.run",
                "--device",
                "cuda",
                "--only",
                name,
            ],
        )
        for name in BENCHMARKS
    }
    written = json.loads(gpu_json.read_text()) if gpu_json.exists() else {}
    for published in (gpu_json, RESULTS / "speed.png", ROOT / "docs" / "results" / "speed.md"):
        if written and published.exists():
            shutil.copy(published, steps.results / published.name)
    return {
        "passed": all(m["returncode"] == 0 for m in modules.values()),
        "modules": modules,
        **written,
    }


RUNNERS = {
    "tests": run_tests,
    "train": run_training,
    "mfu": run_mfu,
    "flex": run_flex,
    "bench": run_benchmarks,
}


def copy_out(results: Path, dest: Path) -> list[str]:
    """The summary, the benchmarks' published files and a tarball of the folder (without
    generated data) into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    copied = []
    for name in ("summary.md", "summary.json", *BENCH_FILES):
        if (results / name).exists():
            shutil.copy(results / name, dest / name)
            copied.append(name)
    with tarfile.open(dest / "results.tar.gz", "w:gz") as tar:
        tar.add(
            results,
            arcname=results.name,
            filter=lambda info: None if "/data" in info.name else info,
        )
    return copied + ["results.tar.gz"]


def parts(text: str) -> list[str]:
    """``all`` or a comma-separated list of ``PARTS``, in the order of ``PARTS``."""
    asked = PARTS if text == "all" else tuple(text.split(","))
    unknown = [p for p in asked if p not in PARTS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown part {', '.join(unknown)}: choose all or from {', '.join(PARTS)}"
        )
    return [p for p in PARTS if p in asked]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m reproduction.gpu.check",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--part",
        type=parts,
        default=list(PARTS),
        help=f"all (the default) or a comma-separated list of {', '.join(PARTS)}",
    )
    p.add_argument(
        "--wheels", type=Path, default=DEFAULT_FOLDER, help="the folder of make gpu-wheels"
    )
    p.add_argument(
        "--results",
        type=Path,
        help="results folder (default reproduction/gpu/results/<UTC time>-<part>)",
    )
    p.add_argument(
        "--copy-to",
        type=Path,
        help="also copy the summary, what bench publishes and a tarball here",
    )
    p.add_argument("--deadline-s", type=float, help="the whole call's time limit in seconds")
    args = p.parse_args(argv)
    try:
        machine = require_cuda()
        wheels = require_wheels(args.wheels)
    except FairseqExtError as e:
        sys.exit(f"gpu-check: {e}")
    deadline = None if args.deadline_s is None else time.time() + args.deadline_s
    name = "all" if args.part == list(PARTS) else "-".join(args.part)
    results = (
        args.results
        or ROOT
        / "reproduction"
        / "gpu"
        / "results"
        / f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{name}"
    )
    results.mkdir(parents=True, exist_ok=True)
    steps = Steps(results, deadline)
    summary = {
        "machine": machine,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "part": name,
        "results": str(results.resolve().relative_to(ROOT))
        if results.resolve().is_relative_to(ROOT)
        else str(results),
        "install": install(wheels, steps),
    }
    if summary["install"]["passed"]:
        for part in args.part:
            print(f"gpu-check: {part} ...", flush=True)
            summary[part] = RUNNERS[part](steps)
    summary["passed"] = all(v["passed"] for k, v in summary.items() if k in ("install", *PARTS))
    write_json(results / "summary.json", summary)
    (results / "summary.md").write_text(render(summary))
    if args.copy_to:
        print(f"gpu-check: copied {', '.join(copy_out(results, args.copy_to))} to {args.copy_to}")
    print(render(summary))
    sys.exit(0 if summary["passed"] else 1)


if __name__ == "__main__":
    main()

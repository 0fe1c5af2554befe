"""``make gpu-rehearsal``: the GPU machine's software, rehearsed on a CPU machine.

The GPU machines it was prepared for do not run this project's ``.venv`` (CPython 3.11, torch
2.13.0): they run CPython 3.12 with their image's own torch, numpy and transformers (``IMAGE``, the
versions their image held in November 2026), and ``make gpu-check`` adds only the wheels of ``make
gpu-wheels``. A failure of that software found only on the GPU machine costs GPU time, so
this command rebuilds it here and runs, without CUDA, everything of ``make gpu-check`` that does
not need CUDA:

* ``setup`` (any Python): a virtual environment of CPython 3.12 with ``IMAGE`` from PyPI
  (PyPI's torch 2.11.0 is a CUDA build: about 3 GB, once), where there is none yet;
* ``run`` (that environment's Python): gpu-check's own offline install of the wheels into
  ``reproduction/gpu/site`` and its import check, then the whole test suite (``pytest -n 2``; the
  CUDA tests skip), every family's base model trained by ``gpu.training`` on the CPU in bfloat16
  (``UPDATES`` updates, a loss logged every ``LOG_INTERVAL``, judged as on the GPU),
  ``gpu.throughput --tiny`` and ``benchmarks.run --quick``. It writes ``gpu/rehearsal.json``
  (versions, exact commands, seconds, verdicts, hardware) and the table between the
  ``gpu-rehearsal`` markers of docs/gpu.md.

What a rehearsal cannot show: anything CUDA does (kernels, fp16 loss scaling, FlexAttention's
compiled kernels, memory, speed). Those wait for ``make gpu-check`` on a GPU.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from fairseq_ext.common.errors import FairseqExtError, require
from reproduction.gpu.training import verdict
from reproduction.gpu.wheels import DEFAULT_FOLDER, require_wheels
from reproduction.results_page import write_between_markers

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_VENV = ROOT / "work" / "gpu-rehearsal"
PUBLISHED = ROOT / "reproduction" / "gpu" / "rehearsal.json"
PAGE = ROOT / "docs" / "gpu.md"
START, END = "<!-- gpu-rehearsal:start -->", "<!-- gpu-rehearsal:end -->"
# the GPU machines' Python packages that the plugin meets (their image, November 2026)
IMAGE = {
    "torch": "2.11.0",
    "numpy": "2.5.2",
    "transformers": "5.17.0",
    "sentencepiece": "0.2.2",
    "safetensors": "0.8.0",
    "sacrebleu": None,
    "scikit-learn": None,
    "regex": None,
    "tqdm": None,
    "pyyaml": None,
    "click": None,
    "joblib": None,
    "absl-py": None,
    "six": None,
    "portalocker": None,
    "tabulate": None,
    "colorama": None,
    "lxml": None,
    "matplotlib": None,
    "pytest": None,
    "pytest-xdist": None,
}
UPDATES, LOG_INTERVAL = 12, 2
# the table this run rewrites is checked against its record by the suite of the clone, not here
PUBLISHED_TABLE_TEST = (
    "reproduction/tests/test_gpu_rehearsal.py::test_published_table_is_the_one_its_record_renders"
)
VERSIONS = ("torch", "numpy", "transformers", "fairseq", "sentencepiece", "sacrebleu")


def find_python(asked: str | None) -> str:
    """A CPython 3.12 interpreter: ``asked``, else ``python3.12`` on PATH, else one under pyenv."""
    candidates = (
        [asked]
        if asked
        else [
            shutil.which("python3.12") or "",
            *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12"))),
        ]
    )
    for python in filter(None, candidates):
        try:
            probe = subprocess.run(
                [python, "-c", "import sys; print(sys.version_info[:2] == (3, 12))"],
                capture_output=True,
                text=True,
            )
        except OSError:  # not there, or not a program
            continue
        if probe.returncode == 0 and probe.stdout.strip() == "True":
            return python
    raise FairseqExtError(
        f"no CPython 3.12 {'at ' + asked if asked else 'found'}: install it (the GPU machines "
        "run 3.12) and pass PYTHON312=/path/to/python3.12"
    )


def requirements() -> list[str]:
    return [name if version is None else f"{name}=={version}" for name, version in IMAGE.items()]


def setup(python: str, venv: Path) -> Path:
    """``venv`` with CPython 3.12 and ``IMAGE``; kept when it already holds them (a stamp file)."""
    stamp = venv / ".image"
    wanted = " ".join(requirements())
    if stamp.exists() and stamp.read_text() == wanted:
        return venv / "bin" / "python"
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    pip = [
        str(venv / "bin" / "python"),
        "-m",
        "pip",
        "install",
        "-q",
        "--disable-pip-version-check",
    ]
    subprocess.run([*pip, *requirements()], check=True)
    stamp.write_text(wanted)
    return venv / "bin" / "python"


def relative(cmd: list[str]) -> str:
    """A command line with this checkout's and this Python's paths written relative to the
    repository."""
    out = []
    for arg in cmd:
        arg = arg.replace(sys.executable, "python")
        out.append(arg.replace(str(ROOT) + os.sep, "").replace(str(ROOT), "."))
    return " ".join(out)


def versions(env: dict) -> dict:
    code = (
        "import importlib, json, sys, torch; out = {'python': sys.version.split()[0], 'cuda': "
        f"torch.cuda.is_available()}}\nfor m in {VERSIONS!r}: out[m] = "
        "importlib.import_module(m).__version__\nprint(json.dumps(out))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT
    )
    return (
        json.loads(proc.stdout.strip().splitlines()[-1])
        if proc.returncode == 0
        else {"error": proc.stderr[-300:]}
    )


def rehearse(wheels: Path, results: Path) -> dict:
    """Every step of the module docstring, each logged in ``results``; the record of the run."""
    from reproduction.gpu import check

    results.mkdir(parents=True, exist_ok=True)
    steps = check.Steps(results, None)
    t0 = time.time()
    wheel_files = require_wheels(wheels)
    record = {"install": check.install(wheel_files, steps)}
    record["versions"] = versions(steps.env)
    suite_xml = results / "suite.xml"
    commands = {
        "suite": [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-n",
            "2",
            "--dist",
            "loadfile",
            "-p",
            "no:cacheprovider",
            "tests",
            "reproduction/tests",
            f"--junitxml={suite_xml}",
            "--deselect",
            PUBLISHED_TABLE_TEST,
        ],
        "train": [
            sys.executable,
            "-m",
            "reproduction.gpu.training",
            "--results",
            str(results),
            "--cpu",
            "--precision",
            "bf16",
            "--updates",
            str(UPDATES),
            "--log-interval",
            str(LOG_INTERVAL),
        ],
        "throughput": [
            sys.executable,
            "-m",
            "reproduction.gpu.throughput",
            "--tiny",
            "--steps",
            "2",
            "--results",
            str(results / "tiny"),
        ],
        "bench": [
            sys.executable,
            "-m",
            "reproduction.benchmarks.run",
            "--quick",
            "--out",
            str(results / "bench"),
        ],
    }
    for name, cmd in commands.items():
        if not record["install"]["passed"]:
            break
        out = steps.run(name, cmd)
        record[name] = {
            "command": relative(cmd),
            "returncode": out["returncode"],
            "seconds": out["seconds"],
            **({} if out["returncode"] == 0 else {"tail": out["tail"]}),
        }
    if suite_xml.exists():
        record["suite"].update(check.junit_totals(suite_xml))
    train_json = results / "train.json"
    if train_json.exists():
        record["train"]["runs"] = [
            {
                k: r[k]
                for k in (
                    "arch",
                    "precision",
                    "updates",
                    "loss_first3",
                    "loss_last3",
                    "seconds",
                    "passed",
                    "failed_checks",
                    "returncode",
                )
            }
            for r in json.loads(train_json.read_text())
        ]
    record["install"] = {
        k: record["install"][k]
        for k in ("passed", "returncode", "seconds")
        if k in record["install"]
    }
    record["passed"] = record["install"]["passed"] and all(
        record.get(k, {}).get("returncode") == 0 for k in commands
    )
    record.update(
        wall_seconds=round(time.time() - t0, 1),
        date=time.strftime("%Y-%m-%d", time.gmtime()),
        hardware=f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, no GPU",
        image=requirements(),
        wheels=sorted(p.name for p in wheel_files),
    )
    return record


def _with_todays_test_paths(command: str) -> tuple[str, bool]:
    """``command`` with each ``tests/NAME.py`` that has since moved to ``reproduction/tests/``
    written where it is now, and whether any was."""
    moved = False

    def today(match: re.Match) -> str:
        nonlocal moved
        path = match.group(2)
        if not (ROOT / path).exists() and (ROOT / "reproduction" / path).exists():
            moved = True
            return match.group(1) + "reproduction/" + path
        return match.group(0)

    return re.sub(r"(^|\s)(tests/[\w/]+\.py)", today, command), moved


def render(record: dict) -> str:
    """The table of docs/gpu.md from ``gpu/rehearsal.json``; test paths as they are today (the
    record keeps those of the day it ran)."""
    v = record.get("versions", {})
    lines = [
        f"Rehearsed {record['date']} on {record['hardware']}: Python {v.get('python')}, torch "
        f"{v.get('torch')}, numpy {v.get('numpy')}, transformers {v.get('transformers')}, "
        f"fairseq {v.get('fairseq')} from the wheels (CUDA available: {v.get('cuda')}); "
        f"{record['wall_seconds'] / 60:.0f} minutes in all, "
        f"{'every step passed' if record['passed'] else 'NOT every step passed'}.",
        "",
        "| step | command | result | seconds |",
        "|---|---|---|---|",
        f"| install | gpu-check's offline install of {len(record['wheels'])} wheels, import "
        f"check | {'ok' if record['install'].get('passed') else 'FAILED'} | "
        f"{record['install'].get('seconds', '')} |",
    ]
    moved = False
    for name in ("suite", "train", "throughput", "bench"):
        step = record.get(name)
        if step is None:
            lines.append(f"| {name} | | not run | |")
            continue
        result = "ok" if step["returncode"] == 0 else f"FAILED (exit {step['returncode']})"
        if "tests" in step:
            result += (
                f": {step['passed_count']} passed, {step['failures'] + step['errors']} failed, "
                f"{step['skipped']} skipped"
            )
        command, was_moved = _with_todays_test_paths(step["command"])
        moved = moved or was_moved
        lines.append(f"| {name} | `{command}` | {result} | {step['seconds']} |")
    if moved:
        lines += [
            "",
            "Test files are named where they are today; the record keeps the paths of the day "
            "it ran.",
        ]
    runs = record.get("train", {}).get("runs", [])
    if runs:
        lines += [
            "",
            "| training on the CPU, bf16 | updates | loss, first 3 -> last 3 logged | seconds | "
            "verdict |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| `{r['arch']}` | {r['updates']} | {r['loss_first3']:.3f} -> {r['loss_last3']:.3f} | "
            f"{r['seconds']} | {verdict(r)} |"
            for r in runs
        ]
    return "\n".join(lines) + "\n"


def publish(record: dict, page: Path = PAGE, published: Path = PUBLISHED) -> None:
    """``gpu/rehearsal.json`` and its table on docs/gpu.md, between the markers."""
    write_between_markers(page, render(record), START, END)
    published.write_text(json.dumps(record, indent=2) + "\n")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m reproduction.gpu.rehearse",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser(
        "setup", help="the CPython 3.12 environment of the GPU image; prints its Python"
    )
    s.add_argument(
        "--python", help="a CPython 3.12 (default: python3.12 on PATH, else one under ~/.pyenv)"
    )
    s.add_argument(
        "--venv", type=Path, default=DEFAULT_VENV, help="where (default work/gpu-rehearsal)"
    )
    r = sub.add_parser("run", help="the rehearsal, with that environment's Python")
    r.add_argument(
        "--wheels", type=Path, default=DEFAULT_FOLDER, help="the folder of make gpu-wheels"
    )
    r.add_argument(
        "--results",
        type=Path,
        default=ROOT / "reproduction" / "gpu" / "results" / "rehearsal",
        help="its logs (default reproduction/gpu/results/rehearsal)",
    )
    r.add_argument(
        "--no-publish", action="store_true", help="leave gpu/rehearsal.json and docs/gpu.md alone"
    )
    args = p.parse_args(argv)
    try:
        if args.command == "setup":
            print(setup(find_python(args.python), args.venv))
            return
        require(
            sys.version_info[:2] == (3, 12),
            f"run needs the rehearsal's CPython 3.12, not {sys.executable}: "
            "use `make gpu-rehearsal`",
        )
        require_wheels(args.wheels)
    except (FairseqExtError, subprocess.CalledProcessError) as e:
        sys.exit(f"gpu-rehearsal: {e}")
    record = rehearse(args.wheels, args.results)
    if not args.no_publish:
        publish(record)
    print(render(record))
    sys.exit(0 if record["passed"] else 1)


if __name__ == "__main__":
    main()

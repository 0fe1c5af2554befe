"""The wheels that ``make gpu-check`` installs on a GPU machine that reaches no package registry.

``make gpu-wheels`` (``python -m reproduction.gpu.wheels``) runs where PyPI is reachable and puts
into ``reproduction/gpu/wheels`` (git-ignored) the CPython 3.12 manylinux x86_64 wheels of what the
plugin needs beyond the GPU machine's image, which already holds torch, numpy, scikit-learn, regex,
tqdm, PyYAML, click, joblib, absl-py, six, portalocker, tabulate, colorama and lxml (docs/gpu.md):
fairseq and its configuration stack, the metrics, and their needs missing from the image.
Two pins, antlr4-python3-runtime 4.9.3 and rouge-score 0.1.2, are published as source only;
both are pure Python, so the wheel ``pip wheel`` builds here (tag ``py3-none-any``) serves
Python 3.12 as well.

The folder is copied to the GPU machine with the working tree; the two together are kept under
``COPY_LIMIT_MIB`` (64 MiB, small enough for a copy to a remote machine with an upload limit), so
it holds exactly these pins and no torch.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

from fairseq_ext.common.errors import FairseqExtError, require

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_FOLDER = ROOT / "reproduction" / "gpu" / "wheels"
COPY_LIMIT_MIB = 64


def pinned(name: str) -> str:
    """The version of ``name`` in the project's one list of pins, constraints.txt."""
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line.split("==")[0].strip() == name:
            return line.split("==")[1].strip()
    raise FairseqExtError(f"constraints.txt pins no {name}")


PINS = {
    "fairseq-fixed": pinned("fairseq-fixed"),  # fairseq 0.12 built to import on Python >= 3.11
    "hydra-core": "1.3.2",
    "omegaconf": "2.3.0",
    "antlr4-python3-runtime": "4.9.3",  # hydra-core's and omegaconf's grammar runtime
    "bitarray": "3.12.3",
    "sacrebleu": "2.6.0",
    "sentencepiece": "0.2.3",
    "rouge-score": "0.1.2",
    "nltk": "3.10.4",  # rouge-score's
    "cffi": "2.1.1",  # fairseq's
    "pycparser": "3.12",  # cffi's
}
SOURCE_ONLY = ("antlr4-python3-runtime", "rouge-score")
TARGET = [
    "--only-binary=:all:",
    "--python-version",
    "3.12",
    "--implementation",
    "cp",
    "--abi",
    "cp312",
    "--platform",
    "manylinux2014_x86_64",
    "--platform",
    "manylinux_2_17_x86_64",
    "--platform",
    "manylinux_2_28_x86_64",
]
# the tags of a wheel that installs on CPython 3.12, Linux x86_64
INSTALLABLE = re.compile(r"-(py3-none-any|cp312-cp312-manylinux[\w.]*x86_64)\.whl$")


def _normalised(name: str) -> str:
    """A distribution name as wheel file names spell it (PEP 427: runs of ``-_.`` become ``_``)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def wheel_for(folder: Path, name: str, version: str) -> Path | None:
    """The wheel of ``name==version`` in ``folder`` that installs on CPython 3.12, if any."""
    prefix = f"{_normalised(name)}-{version}-"
    for path in sorted(Path(folder).glob("*.whl")):
        if path.name.lower().startswith(prefix) and INSTALLABLE.search(path.name):
            return path
    return None


def missing(folder: Path) -> list[str]:
    """The pins (``name==version``) that have no installable wheel in ``folder``."""
    return [
        f"{name}=={version}"
        for name, version in PINS.items()
        if wheel_for(folder, name, version) is None
    ]


def require_wheels(folder: Path) -> list[Path]:
    """Every pinned wheel in ``folder``, or one clear error naming the folder or the missing
    pins."""
    folder = Path(folder)
    require(
        folder.is_dir(),
        f"the wheels folder {folder} is missing: run `make gpu-wheels` on a machine "
        "with PyPI and copy the folder along (docs/gpu.md)",
    )
    absent = missing(folder)
    require(
        not absent,
        f"{folder} lacks {', '.join(absent)}: run `make gpu-wheels` again on a machine "
        "with PyPI (docs/gpu.md)",
    )
    return [wheel_for(folder, name, version) for name, version in PINS.items()]


def _mib(paths) -> float:
    return sum(p.stat().st_size for p in paths) / 2**20


def tree_mib() -> float | None:
    """Size of the working tree copied to the GPU machine besides the wheels: the files git tracks
    and the untracked ones it does not ignore (None outside a git checkout)."""
    proc = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
    )
    if proc.returncode != 0:
        return None
    files = [ROOT / name for name in proc.stdout.decode().split("\0") if name]
    return _mib(p for p in files if p.is_file())


def download(folder: Path) -> list[Path]:
    """Fetch the binary pins for CPython 3.12 manylinux x86_64 and build the source-only ones."""
    folder.mkdir(parents=True, exist_ok=True)
    binary = [f"{n}=={v}" for n, v in PINS.items() if n not in SOURCE_ONLY]
    source = [f"{n}=={PINS[n]}" for n in SOURCE_ONLY]
    pip = [sys.executable, "-m", "pip"]
    subprocess.run(
        [
            *pip,
            "download",
            "--no-deps",
            "--progress-bar",
            "off",
            *TARGET,
            "-d",
            str(folder),
            *binary,
        ],
        check=True,
    )
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--progress-bar", "off", "-w", str(folder), *source],
        check=True,
    )
    return require_wheels(folder)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m reproduction.gpu.wheels",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--dest",
        type=Path,
        default=DEFAULT_FOLDER,
        help="the wheels folder (default: reproduction/gpu/wheels)",
    )
    args = p.parse_args(argv)
    try:
        wheels = download(args.dest)
    except (FairseqExtError, subprocess.CalledProcessError) as e:
        sys.exit(f"gpu-wheels: error: {e}")
    extra = sorted(set(args.dest.glob("*.whl")) - set(wheels))
    if extra:
        print(
            "not pinned, not installed (delete them to copy less): "
            f"{', '.join(p.name for p in extra)}"
        )
    size, tree = _mib(wheels), tree_mib()
    print(f"{len(wheels)} wheels, {size:.1f} MiB in {args.dest}")
    if tree is not None:
        total = tree + size
        verdict = "fits" if total < COPY_LIMIT_MIB else "is over the limit: copy less"
        print(
            f"working tree {tree:.1f} MiB + wheels {size:.1f} MiB = {total:.1f} MiB of the "
            f"{COPY_LIMIT_MIB} MiB copy limit: {verdict}"
        )


if __name__ == "__main__":
    main()

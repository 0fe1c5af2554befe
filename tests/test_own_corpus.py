"""docs/own-corpus.md as a user runs it: its ``bash`` blocks, in order, as one shell session in a
new shell (``PATH`` without the virtual environment, which the page's first block activates),
from a folder holding the clone's ``fairseq_ext/``, ``data_prep/`` and a ``.venv``, on a small
stand-in for the page's corpus (300 training pairs of the shipped sample in its place), with the
two settings the page names for scale set small: ``UPDATES=3`` and ``--vocab 200``. It must print
a BLEU and the hub's translations. ``data_prep/parallel.sh`` takes any file names and refuses bad
input in one line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import BIN_DIR, ROOT, read_sample, write_lines

PAGE = ROOT / "docs" / "own-corpus.md"
SAMPLE = "examples/quickstart/data"
SIZES = {"train": 300, "valid": 20, "test": 20}


def blocks() -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```$", PAGE.read_text(encoding="utf-8"), re.M | re.S)


def new_shell_env() -> dict:
    """A new shell's environment: no virtual environment active, its ``bin`` not on ``PATH``."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "/usr/bin:/bin").split(os.pathsep) if p and p != BIN_DIR
    )
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONWARNINGS"] = "ignore"
    env["PYTHONPATH"] = str(ROOT)
    return env


@pytest.fixture
def clone(tmp_path) -> Path:
    """A folder laid out as a clone after ``make quickstart``, with the small stand-in corpus."""
    for name in ("fairseq_ext", "data_prep"):
        (tmp_path / name).symlink_to(ROOT / name)
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    data = tmp_path / SAMPLE
    data.mkdir(parents=True)
    for split, n in SIZES.items():
        for lang in ("en", "de"):
            write_lines(data / f"{split}.{lang}", read_sample(split, lang, n))
    return tmp_path


def run_bash(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=new_shell_env(),
    )


@pytest.mark.skipif(
    not (Path(sys.prefix) / "bin" / "activate").is_file(), reason="not in a virtual environment"
)
def test_the_page_runs_as_written_in_a_new_shell_and_ends_in_a_bleu(clone):
    code = "\n".join(blocks())
    assert code.startswith("source .venv/bin/activate")
    assert len(re.findall(r"(?m)^UPDATES=\d+$", code)) == 1 and code.count("--vocab 1000") == 1
    code = re.sub(r"(?m)^UPDATES=\d+$", "UPDATES=3", code).replace("--vocab 1000", "--vocab 200")
    proc = run_bash(code, clone)
    assert proc.returncode == 0, f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    assert re.search(r"(?m)^\d+\.\d$", proc.stdout), proc.stdout[-500:]  # sacreBLEU's score
    assert proc.stdout.strip().splitlines()[-1].startswith("['"), proc.stdout[-500:]  # the hub's
    hypotheses = (clone / "mine.hyp.de").read_text(encoding="utf-8").splitlines()
    assert len(hypotheses) == SIZES["test"]
    assert (clone / "checkpoints/mine/checkpoint_last.pt").is_file()


def parallel(clone: Path, *args: str) -> subprocess.CompletedProcess:
    return run_bash(
        "source .venv/bin/activate\nbash data_prep/parallel.sh " + " ".join(args), clone
    )


def files(split: str, src: str = "en", tgt: str = "de") -> list[str]:
    return [
        f"--{split}-src",
        f"{SAMPLE}/{split}.{src}",
        f"--{split}-tgt",
        f"{SAMPLE}/{split}.{tgt}",
    ]


@pytest.mark.parametrize(
    "args, line",
    [
        (
            ["--src", "en", "--tgt", "de", *files("train")],
            "error: --valid-src FILE is missing (see: bash data_prep/parallel.sh --help)",
        ),
        (
            ["--src", "en", "--tgt", "de", *files("train"), *files("valid"), "--test-src", "x"],
            "error: give both --test-src and --test-tgt, or neither",
        ),
        (
            [
                "--src",
                "en",
                "--tgt",
                "de",
                *files("train"),
                "--valid-src",
                f"{SAMPLE}/test.en",
                "--valid-tgt",
                f"{SAMPLE}/valid.de",
                "--test-src",
                f"{SAMPLE}/train.en",
                "--test-tgt",
                f"{SAMPLE}/valid.de",
            ],
            "error: --test-src has 300 lines, --test-tgt 20; line n of one must translate line n "
            "of the other",
        ),
        (
            ["--src", "en", "--tgt", "de", *files("train"), *files("valid"), "--vocab", "32000"],
            None,  # the vocabulary line: sentencepiece's own limit for this text, and --vocab
        ),
    ],
    ids=["missing-file", "one-test-side", "unaligned", "vocab-too-large"],
)
def test_parallel_refuses_bad_input_in_one_line(clone, args, line):
    proc = parallel(clone, *args)
    lines = [x for x in proc.stderr.splitlines() if not x.startswith("clean-pair: ")]
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr[-2000:]
    if line is not None:
        assert lines[0] == line
    else:
        most = re.fullmatch(
            r"spm\.py: error: --vocab 32000 is more pieces than this training text holds; give "
            r"--vocab (\d+) or less \(a few thousand sentence pairs: about 1000\)",
            lines[0],
        )
        assert most and int(most.group(1)) < 32000, lines[0]


def test_parallel_takes_any_file_names_and_gzip(clone, tmp_path_factory):
    mine = tmp_path_factory.mktemp("mine")
    for name, (split, lang) in {
        "corpus.english.txt": ("train", "en"),
        "corpus.german.txt": ("train", "de"),
        "dev-source": ("valid", "en"),
        "dev-target": ("valid", "de"),
    }.items():
        write_lines(mine / name, read_sample(split, lang, SIZES[split]))
    subprocess.run(["gzip", str(mine / "dev-target")], check=True)
    proc = parallel(
        clone, "--src", "en", "--tgt", "de", "--vocab", "200", "--out", "data/any",
        "--train-src", str(mine / "corpus.english.txt"),
        "--train-tgt", str(mine / "corpus.german.txt"),
        "--valid-src", str(mine / "dev-source"), "--valid-tgt", str(mine / "dev-target.gz"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = clone / "data/any"
    assert (out / "raw/valid.de").read_text(encoding="utf-8").splitlines() == read_sample(
        "valid", "de", SIZES["valid"]
    )
    assert sorted(p.name for p in (out / "bin").glob("*.idx")) == [
        f"{s}.en-de.{lang}.idx" for s in ("train", "valid") for lang in ("de", "en")
    ]

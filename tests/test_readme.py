"""Every ``bash`` block of the README runs as a reader runs it: in order, each with ``bash -euo
pipefail``, from a folder that holds the clone's ``fairseq_ext/``, ``data_prep/`` and
``examples/`` (linked there, so that what the blocks write stays out of the clone), on tiny data
(the shipped Multi30k sample, and the tiny Gigaword and WikiText-2 of tests/test_user_scripts.py)
with the one variable the README documents for it set small: ``UPDATES=2``. What each block
says it writes is checked: a data folder, a save folder with ``checkpoint_last.pt``, a
``fairseq-generate`` output with one hypothesis per validation sentence.

A block under a ``<!-- not run by tests/test_readme.py ...: WHY -->`` line is not run as
written, and its test says why: a data script that downloads runs in its offline form instead
(``--local DIR``, the README's own words, and ``--vocab 200`` for the tiny data); ``make`` and
``pip`` are not run at all (the suite itself, a 7-minute quickstart, PyPI). The README's results
summary quotes only numbers its linked pages hold."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, read_sample, script_env, write_lines
from tests.test_own_corpus import new_shell_env
from tests.test_user_scripts import gigaword, wikitext  # noqa: F401  (the tiny data sets, as fixtures)

README = ROOT / "README.md"
MARK = re.compile(r"<!-- not run by tests/test_readme\.py( as written)?: (.+) -->")
DATA_SCRIPT = re.compile(r"^bash data_prep/(\w+)\.sh (.*?)\s*(#.*)?$")
TINY_VOCAB = "200"


def bash_blocks() -> list[tuple[str, str | None, bool]]:
    """``(code, why not as written or None, offline form allowed)`` of each bash block, in order."""
    lines, blocks, i = README.read_text(encoding="utf-8").splitlines(), [], 0
    while i < len(lines):
        if lines[i] == "```bash":
            end = lines.index("```", i + 1)
            mark = MARK.fullmatch(lines[i - 1]) if i else None
            blocks.append(
                (
                    "\n".join(lines[i + 1 : end]) + "\n",
                    mark.group(2) if mark else None,
                    bool(mark and mark.group(1)),
                )
            )
            i = end
        i += 1
    return blocks


BLOCKS = bash_blocks()


def block_id(n: int, code: str) -> str:
    """``3-fairseq-train-data-multi30k-bin``: the block's index and its first command's first
    words."""
    first = next(line for line in code.splitlines() if not re.fullmatch(r"UPDATES=\d+", line))
    return f"{n}-" + re.sub(r"[^a-z0-9]+", "-", " ".join(first.split()[:2]).lower()).strip("-")


IDS = [block_id(n, code) for n, (code, _, _) in enumerate(BLOCKS)]


@pytest.fixture(scope="module")
def multi30k(tmp_path_factory):
    """data_prep/multi30k.sh's --local layout from the shipped sample: train and val pairs."""
    d = tmp_path_factory.mktemp("multi30k")
    for lang in ("en", "de"):
        write_lines(d / f"train.{lang}", read_sample("train", lang, 200))
        write_lines(d / f"val.{lang}", read_sample("valid", lang, 8))
    return d


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, request):
    """The folder the blocks run in, and the indices of the blocks run there so far."""
    folder = tmp_path_factory.mktemp("readme")
    for name in ("fairseq_ext", "data_prep", "examples"):
        (folder / name).symlink_to(ROOT / name)
    (folder / ".venv").symlink_to(Path(sys.prefix))  # what make quickstart made
    local = {
        "multi30k": request.getfixturevalue("multi30k"),
        "gigaword": request.getfixturevalue("gigaword"),
        "wikitext2": request.getfixturevalue("wikitext"),
    }
    return {"folder": folder, "ran": set(), "local": local}


def offline(code: str, local: dict) -> str:
    """A data block in its offline form: each data script with ``--local`` and the tiny
    vocabulary."""
    out = []
    for line in code.splitlines():
        m = DATA_SCRIPT.match(line)
        assert m, f"a block marked as downloading holds {line!r}, which is no data script"
        script, args = m.group(1), m.group(2)
        out.append(
            f"bash data_prep/{script}.sh {args} --local {local[script]} --vocab {TINY_VOCAB}"
        )
    return "\n".join(out) + "\n"


def run_block(index: int, space: dict) -> None:
    code, why, has_offline_form = BLOCKS[index]
    if why is not None:
        code = offline(code, space["local"])
    code = re.sub(r"(?m)^UPDATES=\d+", "UPDATES=2", code)
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code],
        cwd=space["folder"],
        capture_output=True,
        text=True,
        env=script_env(),
    )
    assert proc.returncode == 0, (
        f"README block {IDS[index]} failed ({proc.returncode}):\n{code}\n"
        f"{proc.stdout[-3000:]}\n{proc.stderr[-4000:]}"
    )
    check_outputs(code, space["folder"])
    space["ran"].add(index)


def check_outputs(code: str, folder) -> None:
    """What the block says it writes is there."""
    for out in re.findall(r"--out (\S+)", code):
        assert sorted(p.name for p in (folder / out / "bin").glob("dict*.txt")), (
            f"{out}/bin has no dictionary"
        )
    for save in re.findall(r"--save-dir (\S+)", code) + re.findall(r"pretrain\.sh \S+ (\S+)", code):
        assert (folder / save / "checkpoint_last.pt").is_file(), f"{save} has no checkpoint_last.pt"
    for data, target in re.findall(
        r"fairseq-generate (\S+) .*?-t (\w+) ", code.replace("\\\n", " ")
    ):
        (references,) = (folder / data).parent.glob(f"raw/val*.{target}")
        hypotheses = re.findall(
            r"^H-(\d+)\t", (folder / "gen.txt").read_text(encoding="utf-8"), re.M
        )
        assert sorted(map(int, hypotheses)) == list(
            range(len(references.read_text(encoding="utf-8").splitlines()))
        )


def test_the_readme_has_a_block_per_technique_and_every_block_is_accounted_for():
    assert len(BLOCKS) >= 6
    text = "".join(code for code, _, _ in BLOCKS)
    for task in (
        "cmlm_hybrid",
        "translation_prophetnet",
        "unilm_seq2seq",
        "position_masking/pretrain.sh",
    ):
        assert task in text
    not_run = [
        (IDS[n], why) for n, (_, why, offline_form) in enumerate(BLOCKS) if why and not offline_form
    ]
    assert [i.split("-")[1] for i, _ in not_run] == ["make", "pip"], not_run


@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=IDS)
def test_readme_block_runs(index, workspace):
    code, why, has_offline_form = BLOCKS[index]
    if why is not None and not has_offline_form:
        pytest.skip(f"not run: {why}")
    for earlier in range(index + 1):  # what a block reads, the blocks before it wrote
        if earlier not in workspace["ran"] and not (BLOCKS[earlier][1] and not BLOCKS[earlier][2]):
            run_block(earlier, workspace)


ACTIVATE = "source .venv/bin/activate"


def commands() -> list[str]:
    """Every command of the README's bash blocks, its continuation lines joined."""
    return [
        line
        for code, _, _ in BLOCKS
        for line in code.replace("\\\n", " ").splitlines()
        if line.strip() and not line.startswith("#")
    ]


@pytest.mark.skipif(
    not (Path(sys.prefix) / "bin" / "activate").is_file(), reason="not in a virtual environment"
)
def test_a_new_shell_finds_the_readmes_commands_after_its_activation(tmp_path):
    """The README activates ``.venv`` before its first command that needs it; in a new shell
    (the virtual environment's ``bin`` not on ``PATH``) that line makes every command of the
    blocks, and the Python packages the data scripts import, those of ``.venv``."""
    (first,) = [n for n, (code, _, _) in enumerate(BLOCKS) if code.startswith(ACTIVATE)]
    assert all(why and not offline for _, why, offline in BLOCKS[:first]), "activate it first"
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    names = ["python", "fairseq-train", "fairseq-generate", "fairseq-preprocess", "sacrebleu"]
    firsts = {c.split()[0] if c.split()[0] != "bash" else c.split()[1] for c in commands()}
    assert {"fairseq-train", "fairseq-generate", "data_prep/multi30k.sh"} <= firsts, firsts
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", BLOCKS[first][0] + "command -v " + " ".join(names)
         + "\npython -c 'import sentencepiece, fairseq, fairseq_ext'"],
        cwd=tmp_path, capture_output=True, text=True, env=new_shell_env(),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = proc.stdout.split()  # activate names the folder it was made in: compare resolved
    venv_bin = (tmp_path / ".venv" / "bin").resolve()
    assert [Path(p).parent.resolve() for p in found] == [venv_bin] * len(names), found


def test_blocks_log_progress_within_seconds_and_cap_decode_lengths():
    """Every fairseq-train of the blocks logs every 10 updates or fewer (fairseq's default is
    100: minutes of silence on a CPU); every beam search has a length cap (an undertrained model
    decodes up to fairseq's default of 200 tokens a sentence)."""
    for command in commands():
        if command.startswith("fairseq-train "):
            interval = re.search(r"--log-interval (\d+)", command)
            assert interval and int(interval.group(1)) <= 10, command
        if command.startswith("fairseq-generate ") and "--beam " in command:
            assert re.search(r"--max-len-b \d+", command), command


def test_results_summary_quotes_only_numbers_its_pages_hold():
    lines = README.read_text(encoding="utf-8").splitlines()
    start = lines.index("## Results")
    end = next(n for n in range(start + 1, len(lines)) if lines[n].startswith("## "))
    rows = [line for line in lines[start:end] if line.startswith("| [")]
    assert len(rows) >= 6
    for row in rows:
        pages = re.findall(r"\]\((docs/results/[\w.-]+\.md)\)", row)
        text = "".join((ROOT / p).read_text(encoding="utf-8") for p in pages)
        missing = [
            x
            for x in re.findall(r"\d+\.\d+", row)
            if not re.search(rf"(?<![\d.]){re.escape(x)}(?!\d)", text)
        ]
        assert pages and not missing, f"{pages}: {missing} not found there"

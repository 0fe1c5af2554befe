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

import pytest

from tests.conftest import ROOT, read_sample, script_env, write_lines

# the tiny data sets, as fixtures
from tests.test_user_scripts import gigaword, wikitext  # noqa: F401

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
        out.append(
            f"bash data_prep/{m.group(1)}.sh {m.group(2)} --local {local[m.group(1)]} --vocab "
            f"{TINY_VOCAB}"
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

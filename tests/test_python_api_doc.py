"""The documented Python code runs as a reader runs it, from a folder outside the clone: each
page's ``python`` blocks in order in one process, and every block that begins with an
import also alone in a process of its own (the "Without this API" block among them): ``python -c``,
forked by ``run`` from the tests' server, which has imported torch, fairseq and other libraries but
nothing of the plugin. The blocks'
``examples/...`` paths are relative to a clone; the test makes them absolute. The docs cite
only tests that exist."""

import json
import re
import sys

import pytest

from tests.conftest import ROOT, run

MODEL = ROOT / "examples" / "quickstart" / "model"
PAGES = {
    "docs/python-api.md": None,
    "README.md": "## Python",
}  # page -> its section with the blocks (None: all)
TEST_PATH = re.compile(r"(?<![\w./-])tests/[\w./-]*\w")
# a dated record of the commands a rehearsal ran, before the GPU tests moved to reproduction/tests
RECORDS = [("<!-- gpu-rehearsal:start -->", "<!-- gpu-rehearsal:end -->")]


def blocks(page: str) -> list[str]:
    text = (ROOT / page).read_text(encoding="utf-8")
    if PAGES[page]:
        start = text.index(f"\n{PAGES[page]}\n")
        end = text.find("\n## ", start + 1)
        text = text[start : end if end > 0 else None]
    found = re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)
    assert found, f"{page}: no python block"
    return [re.sub(r"([\"'])examples/", rf"\g<1>{ROOT}/examples/", code) for code in found]


def python(code: str, folder) -> str:
    """stdout of ``code`` in an interpreter of its own started in ``folder`` (which imports the
    package of this clone: an editable install, or the PYTHONPATH that ``run`` sets)."""
    return run([sys.executable, "-c", code], cwd=folder).stdout


@pytest.mark.parametrize("page", PAGES)
def test_a_pages_blocks_run_in_order_in_one_process(page, tmp_path):
    assert python("\n".join(blocks(page)), tmp_path).strip()


STANDALONE = [
    (page, i)
    for page in PAGES
    for i, code in enumerate(blocks(page))
    if re.match(r"(import|from) ", code)
]


@pytest.mark.parametrize("page,index", STANDALONE, ids=[f"{p}-{i}" for p, i in STANDALONE])
def test_a_block_that_begins_with_an_import_runs_alone(page, index, tmp_path):
    assert python(blocks(page)[index], tmp_path).strip()


def test_the_without_this_api_block_stands_alone_and_gives_an_eval_model(tmp_path):
    """fairseq's own loader with ``user_dir`` in a process that imported nothing of the plugin;
    after the block's ``.eval()`` nothing is in training mode."""
    code = next(c for c in blocks("docs/python-api.md") if "user_dir=plugin_dir" in c)
    out = python(code + "print(any(m.training for m in fairseq_model.modules()))\n", tmp_path)
    assert out.split()[-1] == "False"


def test_translate_keeps_empty_inputs_in_a_process_of_its_own_outside_the_clone(tmp_path):
    code = (
        "import json\nfrom fairseq_ext import hub\n"
        f"model = hub.from_pretrained({str(MODEL)!r})\n"
        "print(json.dumps(model.translate(['', 'A dog runs.', 'A cat sleeps.'])))\n"
        "print(json.dumps(model.translate(['A dog runs.', 'A cat sleeps.'])))\n"
        "print(json.dumps(model.translate(' ')))\n"
    )
    proc = run([sys.executable, "-c", code], cwd=tmp_path)
    with_empty, without, alone = [json.loads(line) for line in proc.stdout.splitlines()[-3:]]
    assert with_empty == ["", *without] and len(without) == 2 and all(without) and alone == ""
    assert "is empty" not in proc.stderr  # fairseq-interactive's note is not the API's


def test_the_docs_cite_only_tests_that_exist():
    missing = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        for start, end in RECORDS:
            if start in text:
                text = text[: text.index(start)] + text[text.index(end) :]
        for path in TEST_PATH.findall(text):
            if not (ROOT / path.split("::")[0]).exists():
                missing.append(f"{page.relative_to(ROOT)}: {path}")
    assert not missing, "the docs name tests that do not exist: " + ", ".join(missing)


def test_test_paths_are_found_where_the_docs_name_them():
    assert TEST_PATH.findall(
        "see `tests/test_hub.py`, tests/a_b.py::t and reproduction/tests/x.py."
    ) == ["tests/test_hub.py", "tests/a_b.py"]

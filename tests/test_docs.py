"""The documentation as a user reads it: a short README, links that resolve (files and the
headings they point at), every generated table on the docs page its script writes, and no
path that leads outside a clone."""

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
# generated block -> (the page that holds it, the script or driver that writes it, how it names
# the page)
GENERATED = {
    "table1": (
        "docs/results/hi-cmlm.md",
        "reproduction/hi_cmlm/multi30k.sh",
        '--page "$ROOT/docs/results/hi-cmlm.md"',
    ),
    "table2": (
        "docs/results/prophetnet.md",
        "reproduction/prophetnet/compare_gigaword.sh",
        '--page "$ROOT/docs/results/prophetnet.md"',
    ),
    "bisection": (
        "docs/results/prophetnet.md",
        "reproduction/prophetnet/bisect.sh",
        '--page "$ROOT/docs/results/prophetnet.md"',
    ),
    "batches": (
        "docs/results/prophetnet.md",
        "reproduction/prophetnet/bisect.sh",
        '--page "$ROOT/docs/results/prophetnet.md"',
    ),
    "table3-minilm": (
        "docs/results/position-masking.md",
        "reproduction/position_masking/minilm.sh",
        '--page "$ROOT/docs/results/position-masking.md"',
    ),
    "unilm-pretrained": (
        "docs/results/unilm.md",
        "reproduction/unilm/pretrained_gigaword.sh",
        '--page "$ROOT/docs/results/unilm.md"',
    ),
    "bench": (
        "docs/results/speed.md",
        "reproduction/benchmarks/run.py",
        'ROOT / "docs" / "results" / "speed.md"',
    ),
    "maskpredict-rows": (
        "docs/results/speed.md",
        "reproduction/benchmarks/run.py",
        'ROOT / "docs" / "results" / "speed.md"',
    ),
    "gpu-rehearsal": ("docs/gpu.md", "reproduction/gpu/rehearse.py", 'ROOT / "docs" / "gpu.md"'),
    "gpu-check": ("docs/gpu.md", "reproduction/gpu/publish.py", 'ROOT / "docs" / "gpu.md"'),
    "table3-glue-full": (
        "docs/results/position-masking.md",
        "reproduction/position_masking/collect_glue_full.py",
        'ROOT / "docs" / "results" / "position-masking.md"',
    ),
    "gigaword-10k": (
        "docs/results/gigaword-10k.md",
        "reproduction/gigaword_10k/protocol.py",
        'ROOT / "docs" / "results" / "gigaword-10k.md"',
    ),
    # the summary lines that were the README's until it had to stay short
    "decoding-speed": (
        "docs/results/speed.md",
        "reproduction/benchmarks/run.py",
        'ROOT / "docs" / "results" / "speed.md"',
    ),
    "table3-glue-summary": (
        "docs/results/position-masking.md",
        "reproduction/position_masking/collect_glue.py",
        'ROOT / "docs" / "results" / "position-masking.md"',
    ),
    "table3-glue-full-summary": (
        "docs/results/position-masking.md",
        "reproduction/position_masking/collect_glue_full.py",
        'ROOT / "docs" / "results" / "position-masking.md"',
    ),
    "gigaword-10k-summary": (
        "docs/results/gigaword-10k.md",
        "reproduction/gigaword_10k/protocol.py",
        'ROOT / "docs" / "results" / "gigaword-10k.md"',
    ),
}


def prose(text: str) -> list[str]:
    """The lines of a Markdown text outside fenced code blocks, with inline code removed."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(re.sub(r"`[^`]*`", "", line))
    return lines


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens, repeats
    numbered."""
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        heading = re.match(r"#{1,6} (.+)", line)
        if heading and not fenced:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
            out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
            seen[slug] = seen.get(slug, 0) + 1
    return out


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) < 300, f"README.md has {len(lines)} lines; move the details to docs/"
    long = [n for n, line in enumerate(lines, 1) if len(line) > 400]
    assert not long, f"README.md lines {long} are over 400 characters; move the details to docs/"


def test_readme_reaches_a_command_at_once_and_keeps_its_results_short():
    """The first complete command (a code block) within the first 40 lines, and the results
    section (its heading to the next) under 25 lines: the rest lives on the results pages."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    first = next(n for n, line in enumerate(lines, 1) if line.startswith("```bash"))
    assert first + 1 <= 40, f"README.md's first command is on line {first + 1}"
    start = lines.index("## Results")
    end = next(n for n in range(start + 1, len(lines)) if lines[n].startswith("## "))
    assert end - start < 25, f"README.md's results section has {end - start} lines"


def test_anchors_follow_githubs_rule(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# One `code` (a, b): c's\n```bash\n# not a heading\n```\n## Again\n## Again\n")
    assert anchors(page) == {"one-code-a-b-cs", "again", "again-1"}


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_resolves(page):
    broken = []
    for line in prose(page.read_text(encoding="utf-8")):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.is_relative_to(ROOT) or not file.exists():
                broken.append(f"{target}: no file {file}")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{target}: {file.relative_to(ROOT)} has no heading #{anchor}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


@pytest.mark.parametrize("name", GENERATED)
def test_each_generated_table_lives_on_the_page_its_script_writes(name):
    page, writer, target = GENERATED[name]
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    text = (ROOT / page).read_text(encoding="utf-8")
    assert text.count(start) == 1 and text.count(end) == 1 and text.index(start) < text.index(end)
    assert start not in (ROOT / "README.md").read_text(encoding="utf-8")
    assert target in (ROOT / writer).read_text(encoding="utf-8"), f"{writer} does not write {page}"


def test_nothing_a_clone_holds_points_outside_it():
    files = [
        *PAGES,
        ROOT / "Makefile",
        *(ROOT / "data_prep").iterdir(),
        *(
            p
            for folder in ("examples", "reproduction")
            for p in (ROOT / folder).rglob("*")
            if p.suffix in {".sh", ".py", ".md"}
            and "runs" not in p.parts
            and "results" not in p.parts
            and "tests" not in p.parts
        ),
    ]
    hits = [
        f"{f.relative_to(ROOT)}:{n}"
        for f in files
        if f.is_file()
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1)
        if "../shared" in line or re.search(r"\bthe seeds?(?![\w-])", line, re.IGNORECASE)
    ]
    assert not hits, "paths outside the clone or 'the seed' (cite the paper instead): " + ", ".join(
        hits
    )


def test_every_script_a_user_runs_is_executable():
    """A shell script is run as the docs write it (``reproduction/hi_cmlm/shipped_models.sh``),
    so git must record it executable; only the helpers other scripts ``source`` may be plain."""
    import subprocess

    staged = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-s", "*.sh"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    if not staged:
        pytest.skip("not a git checkout")
    scripts = {line.split("\t")[1]: line.split()[0] for line in staged}
    sourced = {
        name
        for path in scripts
        for name in re.findall(
            r"^\s*(?:source|\.) \S*?([\w.-]+\.sh)\"?\s*$",
            (ROOT / path).read_text(encoding="utf-8"),
            re.M,
        )
    }
    plain = [
        path
        for path, mode in scripts.items()
        if mode != "100755" and Path(path).name not in sourced
    ]
    assert not plain, "not executable in git (chmod +x, then git add): " + ", ".join(plain)


COMMAND = re.compile(r"(?m)^\s*(fairseq-|python |bash |examples/|data_prep/|sacrebleu )")


@pytest.mark.parametrize(
    "page",
    [p for p in PAGES if "results" not in p.parts],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_a_page_with_commands_says_to_activate_the_venv_before_them(page):
    """After ``make quickstart`` a new shell has neither fairseq's commands nor the Python that
    the data scripts need on ``PATH``: a page says ``source .venv/bin/activate`` before its
    first command."""
    text = page.read_text(encoding="utf-8")
    first = next(
        (m.start() for m in re.finditer(r"^```(?:bash|sh)\n(.*?)^```$", text, re.M | re.S)
         if COMMAND.search(m.group(1))),
        None,
    )  # fmt: skip
    if first is not None:
        assert "source .venv/bin/activate" in text[: first + 200], page.relative_to(ROOT)

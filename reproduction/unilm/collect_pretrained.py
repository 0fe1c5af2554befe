#!/usr/bin/env python
"""Collect the runs of pretrained_gigaword.sh into the UniLM-from-MiniLM table
(docs/results/unilm.md).

    python -m reproduction.unilm.collect_pretrained --runs reproduction/unilm/runs --refs
    VALID_TITLES
        [--out DIR] [--publish reproduction/unilm] [--page docs/results/unilm.md]

The same statistics as table 2 (``reproduction/prophetnet/collect_gigaword.py``): per row and
scored point, mean and standard deviation over seeds of ROUGE-1/2/L F1, distinct headlines,
teacher-forced validation accuracy, and a paired bootstrap of the sentence
ROUGE-1 (averaged over random seeds) of each MiniLM start against the random start with the same
vocabulary, and of each --keep-tokens row against the same start with the full vocabulary.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
PAGE = HERE.parents[1] / "docs" / "results" / "unilm.md"
LABELS = {
    "minilm": "from MiniLM",
    "minilm-keep": "from MiniLM, --keep-tokens",
    "random": "random start",
    "random-keep": "random start, --keep-tokens",
}
COMPARISONS = [
    ("minilm", "random"),
    ("minilm-keep", "random-keep"),
    ("minilm-keep", "minilm"),
    ("random-keep", "random"),
]
START, END = "<!-- unilm-pretrained:start -->", "<!-- unilm-pretrained:end -->"


def _collector():
    path = HERE.parent / "prophetnet" / "collect_gigaword.py"
    spec = importlib.util.spec_from_file_location("collect_gigaword", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--runs", type=Path, required=True, help="the kept runs, NAME-sSEED each")
    p.add_argument(
        "--refs", type=Path, help="validation titles; without them no significance test is run"
    )
    p.add_argument(
        "--out",
        type=Path,
        help="folder for results.json, results.md and the figure (default --runs/..)",
    )
    p.add_argument(
        "--publish", type=Path, help="folder that gets pretrained_results.json/.md and figures/"
    )
    p.add_argument(
        "--page",
        type=Path,
        help=f"Markdown page whose unilm-pretrained block is rewritten ({PAGE})",
    )
    a = p.parse_args(argv)
    collect = _collector()
    refs = a.refs.read_text().splitlines() if a.refs and a.refs.exists() else None
    summary = collect.summarise(a.runs, refs, LABELS, COMPARISONS)
    summary["setup"] = (
        "unilm_transformer (prefix mask) with all-MiniLM-L6-v2's sizes, WordPiece 30522; "
        "MiniLM start converted by python -m fairseq_ext.convert; learning rates in the commands"
    )
    table = collect.markdown(summary)
    out = a.out or a.runs.parent
    out.mkdir(parents=True, exist_ok=True)
    (out / "pretrained_results.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "pretrained_results.md").write_text(table)
    collect.plot(summary, out / "unilm_pretrained_rouge_curves.png")
    print(table, end="")
    if a.publish:
        (a.publish / "figures").mkdir(parents=True, exist_ok=True)
        for name in ("pretrained_results.json", "pretrained_results.md"):
            if (out / name).resolve() != (a.publish / name).resolve():
                shutil.copy(out / name, a.publish / name)
        shutil.copy(
            out / "unilm_pretrained_rouge_curves.png",
            a.publish / "figures" / "unilm_pretrained_rouge_curves.png",
        )
    if a.page:
        collect.write_into_page(a.page, table, START, END)


if __name__ == "__main__":
    main()

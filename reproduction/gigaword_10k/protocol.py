"""The terms the Gigaword 10k table's scripts share (docs/results/gigaword-10k.md): where its
results, page and the page's summary lines live, the splits, the model rows, the words a run record
uses for how it stopped, the verdicts that other text reads, how many seeds decide a claim and the
user scripts whose defaults follow a row."""

from __future__ import annotations

from pathlib import Path

# a run record's "stopped"; how many seeds of each trained row a claim waits for
from reproduction.convergence import CAPPED, EARLY_STOPPED, SEEDS_FOR_A_VERDICT  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "reproduction" / "gigaword_10k" / "results.json"
PAGE = ROOT / "docs" / "results" / "gigaword-10k.md"
START, END = "<!-- gigaword-10k:start -->", "<!-- gigaword-10k:end -->"
SUMMARY_MARKERS = (
    "<!-- gigaword-10k-summary:start -->",
    "<!-- gigaword-10k-summary:end -->",
)  # on PAGE, above the table
VALID = ("valid1k", "valid4k")
CHOOSE_ON = "valid4k"
TEST = "test1951"
ESTABLISHED, OPPOSITE = (
    "yes",
    "no, the opposite",
)  # a claim's verdict when a difference is established
USER_SCRIPTS = {
    # defaults follow the row once converged
    "unilm-minilm": "examples/pretrained/minilm_gigaword.sh",
    "unilm-random": "examples/unilm/gigaword.sh",
    "p2-pt": "examples/prophetnet/gigaword.sh",
}
# the model rows of the table, run by the driver (docs/results/gigaword-10k.md says which)
MODEL_ROWS = [
    "fairseq transformer (tiny, no pre-training)",
    "ProphetNet n = 1, no pre-training",
    "ProphetNet n = 2, no pre-training",
    "ProphetNet n = 1, span pre-training",
    "ProphetNet n = 2, span pre-training",
    "UniLM at random",
    "UniLM from MiniLM",
]

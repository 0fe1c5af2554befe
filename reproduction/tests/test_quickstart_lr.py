"""reproduction/hi_cmlm/quickstart_lr.py's runs are make quickstart's training step with another
learning rate and a fixed number of updates."""

import re
from pathlib import Path

from reproduction.hi_cmlm.quickstart_lr import train_command
from tests.conftest import ROOT


def test_learning_rate_runs_train_as_make_quickstart_does():
    """reproduction/hi_cmlm/quickstart_lr.py restates make quickstart's fairseq-train: every option
    of examples/quickstart/run.sh's training step (but the time budget and paths) is in it."""
    script = (ROOT / "examples" / "quickstart" / "run.sh").read_text()
    step = script[
        script.index('fairseq-train "$WORK/bin"') : script.index(
            'fairseq_progress "$WORK/train.log"'
        )
    ]
    options = dict(re.findall(r"(--[\w-]+) ((?!--)'[^']*'|(?!--)[^\s\\$\"]+)", step))
    options.pop("--lr")  # the rate is what the runs vary
    command = [str(c) for c in train_command(Path("bin"), "1e-4", 1, 85, Path("save"))]
    pairs = {
        command[i]: command[i + 1] for i in range(len(command) - 1) if command[i].startswith("--")
    }
    assert options and all(pairs.get(k) == v.strip("'") for k, v in options.items()), (
        options,
        pairs,
    )
    assert "--lr-scheduler" in options and "--train-copy-share" in options

"""reproduction/prophetnet/reference_transformers.py, the independent reference of table 2:
transformers' ProphetNet (predicting-stream layout corrected) trained on fairseq's batches,
scored at several points, resumable exactly; this plugin's model runs in the same loop. Its
``main`` runs in this process (one import of transformers and fairseq for the file); one bad
option runs the script as a command."""

import contextlib
import io
import json
import sys

import pytest
import torch

from tests.conftest import ROOT, binarize, read_sample, run

pytest.importorskip("transformers")
SCRIPT = ROOT / "reproduction" / "prophetnet" / "reference_transformers.py"
SIZES = [
    "--arch",
    "prophetnet_tiny",
    "--max-tokens",
    "600",
    "--warmup",
    "2",
    "-s",
    "en",
    "-t",
    "de",
]


@pytest.fixture(scope="module")
def few_valid(tmp_path_factory, spm_model):
    """The 400 training pairs of ``tiny_data`` with 8 validation pairs: each point decodes the
    validation pairs with beam 4, the cost of these runs."""
    return binarize(
        spm_model,
        tmp_path_factory.mktemp("few_valid"),
        {
            "train": (read_sample("train", "en", 400), read_sample("train", "de", 400)),
            "valid": (read_sample("valid", "en", 8), read_sample("valid", "de", 8)),
        },
    )


def reference(data, out, *extra):
    """The script's main() on the binarized pairs DATA; what it printed."""
    from reproduction.prophetnet import reference_transformers

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        reference_transformers.main(
            [
                str(data),
                "--refs",
                str(data.parent / "raw" / "valid.raw.de"),
                "--out",
                str(out),
                *SIZES,
                *map(str, extra),
            ]
        )
    return printed.getvalue()


def test_reference_scores_every_point_and_resumes_exactly(few_valid, tmp_path):
    whole, split = tmp_path / "whole", tmp_path / "split"
    reference(few_valid, whole, "--updates", 4, "--eval-at", 2, 4)
    reference(few_valid, split, "--updates", 2, "--eval-at", 2)
    out = reference(few_valid, split, "--updates", 4, "--eval-at", 2, 4)
    assert "resumed from" in out and "at update 2" in out
    results = json.loads((whole / "results.json").read_text())
    assert sorted(results["points"]) == ["2", "4"]
    for point in results["points"].values():
        assert point["sentences"] == 8 and 1 <= point["distinct_hypotheses"] <= 8
        assert len(point["valid_accuracy_per_stream"]) == 2  # --ngram 2 (default)
        assert 0 <= point["rouge1_f1"] <= 100
    assert all(not c.startswith("/") and str(ROOT) not in c for c in results["commands"])
    a = torch.load(whole / "state.pt", weights_only=True)
    b = torch.load(split / "state.pt", weights_only=True)
    assert a["update"] == b["update"] == 4
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert (whole / "hyp-4.title").read_text() == (split / "hyp-4.title").read_text()
    assert "every point is done" in reference(few_valid, whole, "--updates", 4, "--eval-at", 2, 4)


@pytest.mark.parametrize("batching", ["unsorted", "fairseq-unsorted"])
def test_this_plugins_model_runs_in_the_same_loop(few_valid, tmp_path, batching):
    reference(
        few_valid,
        tmp_path,
        "--model",
        "fairseq_ext",
        "--ngram",
        3,
        "--updates",
        2,
        "--batching",
        batching,
    )
    point = json.loads((tmp_path / "results.json").read_text())["points"]["2"]
    assert len(point["valid_accuracy_per_stream"]) == 3


def test_reference_rejects_bad_options_in_one_line(tiny_data, tmp_path, capsys):
    proc = run(
        [
            sys.executable,
            SCRIPT,
            tiny_data,
            "--refs",
            tiny_data.parent / "raw" / "valid.raw.de",
            "--out",
            tmp_path,
            *SIZES,
            "--model",
            "fairseq_ext",
            "--layout",
            "as-released",
        ],
        check=False,
    )
    assert (
        proc.returncode == 2
        and "choose parts of the transformers" in proc.stderr
        and "Traceback" not in proc.stderr
    )
    with pytest.raises(SystemExit) as stop:
        reference(tiny_data, tmp_path, "--eval-at", 9, "--updates", 4)
    assert stop.value.code == 2 and "--eval-at must lie within" in capsys.readouterr().err
    assert not (tmp_path / "results.json").exists()


def test_batch_stats_count_every_pair_once_per_epoch(tiny_data, tmp_path):
    """reproduction/prophetnet/batch_stats.py: over one epoch every way of cutting batches covers
    the
    400 training pairs exactly once; fairseq's iterator rounds batches down to multiples of 8
    pairs (all but the few where 8 long pairs exceed --max-tokens, or the epoch's last), the
    reference loop's unsorted batches are not rounded and so hold more pairs."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from batch_stats import KINDS, markdown, statistics_of
    finally:
        sys.path.remove(str(SCRIPT.parent))
    rows = {}
    for kind in KINDS:
        epoch = statistics_of(str(tiny_data), kind, 600, 1, 1, "en", "de")["batches_per_epoch"]
        rows[kind] = statistics_of(str(tiny_data), kind, 600, 1, epoch, "en", "de")
        assert rows[kind]["pairs_seen"] == 400
    for kind in ("fairseq", "fairseq-unsorted"):
        assert rows[kind]["share_of_batches_a_multiple_of_8"] >= 0.9
    assert rows["unsorted"]["share_of_batches_a_multiple_of_8"] < 0.5
    assert (
        rows["unsorted"]["pairs_per_batch_mean"] > rows["fairseq-unsorted"]["pairs_per_batch_mean"]
    )
    table = markdown({"max_tokens": 600, "seed": 1, "updates": 7, "kinds": rows})
    assert table.count("\n") == 2 + len(KINDS) and "| fairseq-train --unsorted-batches |" in table

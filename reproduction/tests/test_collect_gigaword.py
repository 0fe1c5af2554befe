"""reproduction/prophetnet/collect_gigaword.py and gigaword_point.py: table 2 is computed from the
runs' own results files (the three formats of gigaword.sh, reference_transformers.py and
unilm/gigaword.sh), with mean and spread over seeds, distinct headlines, per-stream accuracy
read from fairseq's validation lines, bootstrap verdicts, a plot and the results-page block."""

import gzip
import importlib.util
import json
import statistics
import subprocess
import sys

import numpy as np

from tests.conftest import ROOT, cli_env

HERE = ROOT / "reproduction" / "prophetnet"
SCRIPT = HERE / "collect_gigaword.py"
USER_SCRIPTS = (
    ROOT / "examples" / "prophetnet"
)  # gigaword_point.py: the results-file helpers of gigaword.sh
REFS = [f"police arrest man {i} in city" for i in range(40)]


def _module(name):
    spec = importlib.util.spec_from_file_location(
        name, (USER_SCRIPTS if name == "gigaword_point" else HERE) / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(work, name, seed, points, hyps):
    """A gigaword.sh-style run: results.json with points, and hyp-N.title per point."""
    folder = work / "runs" / f"{name}-s{seed}"
    folder.mkdir(parents=True)
    for update in points:
        (folder / f"hyp-{update}.title").write_text("\n".join(hyps) + "\n")
    folder.joinpath("results.json").write_text(
        json.dumps(
            {
                "points": [dict(update=u, **p) for u, p in points.items()],
                "pretrain_updates": 0,
                "wall_seconds": {"total": 100},
                "commands": ["bash examples/prophetnet/gigaword.sh"],
            }
        )
    )


def _point(r1, distinct, acc):
    return {
        "rouge1_f1": r1,
        "rouge2_f1": r1 / 4,
        "rougeL_f1": r1 - 1,
        "sentences": 40,
        "distinct_hypotheses": distinct,
        "valid_accuracy_per_stream": acc,
    }


def test_seeds_points_and_verdicts(tmp_path):
    module = _module("collect_gigaword")
    garbage = ["the the the"] * 40
    for seed, r1 in ((1, 10.0), (2, 12.0), (3, 15.0)):
        _run(
            tmp_path,
            "p1",
            seed,
            {250: _point(r1 - 5, 30, [10.0]), 500: _point(r1, 35, [20.0 + seed])},
            REFS,
        )
    for seed, r1 in ((1, 2.0), (2, 3.0)):
        _run(
            tmp_path,
            "p2",
            seed,
            {250: _point(r1, 1, [9.0, 8.0]), 500: _point(r1, 1, [14.0, 12.0])},
            garbage,
        )
    ref = (
        tmp_path / "runs" / "ref-p2-s1"
    )  # reference_transformers.py's format: points keyed by update
    ref.mkdir(parents=True)
    (ref / "hyp-500.title").write_text("\n".join(garbage) + "\n")
    ref.joinpath("results.json").write_text(
        json.dumps({"points": {"500": _point(2.5, 1, [15.0, 12.5])}, "wall_seconds": {"total": 50}})
    )
    summary = module.summarise(tmp_path / "runs", REFS)
    assert list(summary["models"]) == ["p1", "p2", "ref-p2"]
    assert summary["batching"] == "fairseq's length-sorted batches"
    row = summary["models"]["p1"]["points"][500]
    assert row["n_seeds"] == 3 and row["seeds"] == [1, 2, 3]
    assert np.isclose(row["rouge1_f1"], np.mean([10, 12, 15])) and np.isclose(
        row["rouge1_f1_std"], np.std([10, 12, 15], ddof=1)
    )
    assert row["valid_accuracy_per_stream"] == [22.0] and row["distinct_mean"] == 35
    assert summary["models"]["p2"]["points"][500]["valid_accuracy_per_stream"] == [14.0, 12.0]
    verdicts = {(c["model"], c["update"]): c for c in summary["comparisons"]}
    assert verdicts[("p2", 500)]["verdict"] == "worse" and verdicts[("p2", 500)]["p_value"] == 0.0
    assert verdicts[("ref-p2", 500)]["verdict"] == "no significant difference"  # identical outputs
    assert (
        verdicts[("ref-p2", 500)]["p_value"] == 1.0
        and verdicts[("ref-p2", 500)]["delta_rouge1"] == 0
    )
    assert summary["wall_seconds_all_runs"] == 5 * 100 + 50
    assert any(
        f.startswith("ProphetNet n=2 vs ProphetNet n=1") and "worse at 250" in f
        for f in summary["findings"]
    )
    table = module.markdown(summary)
    assert "| ProphetNet n=1 (next token only) | 3 | 500 | 12.33 ± 2.52 |" in table

    page = tmp_path / "prophetnet.md"
    page.write_text("intro\n<!-- table2:start -->\nold\n<!-- table2:end -->\nrest\n")
    proc = subprocess.run(
        [
            sys.executable,
            SCRIPT,
            "--work",
            tmp_path,
            "--refs",
            _refs(tmp_path),
            "--publish",
            tmp_path / "pub",
            "--page",
            page,
        ],
        capture_output=True,
        text=True,
        check=True,
        env=cli_env(),
    )
    assert "published to" in proc.stdout
    text = page.read_text()
    assert text.startswith(
        "intro\n<!-- table2:start -->\nFine-tuning batches: fairseq's length-sorted "
        "batches.\n\n| model |"
    )
    assert text.endswith("<!-- table2:end -->\nrest\n")
    assert "old" not in text
    assert (tmp_path / "pub" / "figures" / "gigaword_rouge_curves.png").stat().st_size > 5000


def test_main_table_compares_rows_at_the_last_point_they_share(tmp_path):
    module = _module("collect_gigaword")
    _run(
        tmp_path,
        "p1",
        1,
        {
            250: _point(5.0, 30, [10.0]),
            500: _point(10.0, 35, [20.0]),
            1000: _point(14.0, 38, [25.0]),
        },
        REFS,
    )
    _run(
        tmp_path,
        "p2",
        1,
        {250: _point(2.0, 1, [9.0, 8.0]), 500: _point(3.0, 1, [14.0, 12.0])},
        REFS,
    )
    table = module.markdown(module.summarise(tmp_path / "runs", REFS))
    assert "Every row at 500 updates, the last point all rows reached" in table
    assert "| ProphetNet n=1 (next token only) | 1 | 500 | 10.00 |" in table
    assert "| ProphetNet n=1 (next token only) | 5.00 (30) | 10.00 (35) | 14.00 (38) |" in table
    assert "| ProphetNet n=2 | 2.00 (1) | 3.00 (1) |  |" in table


def test_a_row_is_compared_with_each_of_its_baselines(tmp_path):
    """n = 3 against n = 1 and against n = 2: two bootstrap lines, each with its own baseline."""
    module = _module("collect_gigaword")
    worse = [f"police arrest man {i}" for i in range(40)]
    _run(tmp_path, "p1", 1, {500: _point(10.0, 35, [20.0])}, REFS)
    _run(tmp_path, "p2", 1, {500: _point(8.0, 30, [18.0, 15.0])}, REFS)
    _run(tmp_path, "p3", 1, {500: _point(5.0, 20, [16.0, 14.0, 13.0])}, worse)
    summary = module.summarise(tmp_path / "runs", REFS)
    against = {c["baseline"]: c for c in summary["comparisons"] if c["model"] == "p3"}
    assert sorted(against) == ["p1", "p2"]
    assert all(c["verdict"] == "worse" and c["delta_rouge1"] < 0 for c in against.values())
    assert any(
        f.startswith("ProphetNet n=3 vs ProphetNet n=2: worse at 500") for f in summary["findings"]
    )


def test_distinct_headlines_are_counted_from_the_hypotheses_when_the_run_does_not_count_them(
    tmp_path,
):
    """examples/unilm/gigaword.sh's results file has no distinct count: the collector counts the
    different lines of its kept hypotheses."""
    module = _module("collect_gigaword")
    folder = tmp_path / "runs" / "unilm-s1"
    folder.mkdir(parents=True)
    hyps = [f"headline {i % 7}" for i in range(40)]
    with gzip.open(folder / "hyp-500.title.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(hyps) + "\n")
    folder.joinpath("results.json").write_text(
        json.dumps(
            {"updates": 500, "rouge1_f1": 5.0, "rouge2_f1": 1.0, "rougeL_f1": 4.5, "sentences": 40}
        )
    )
    row = module.summarise(tmp_path / "runs", REFS)["models"]["unilm"]["points"][500]
    assert (row["distinct_mean"], row["distinct_min"], row["distinct_max"]) == (7, 7, 7)


def test_rows_on_other_batches_than_the_rest_are_named(tmp_path):
    module = _module("collect_gigaword")
    models = {
        "p1": {"label": "n=1", "commands": {1: ["fairseq-train --unsorted-batches"]}},
        "p2": {"label": "n=2", "commands": {1: ["fairseq-train --unsorted-batches"]}},
        "unilm": {"label": "UniLM", "commands": {1: ["fairseq-train --task unilm_seq2seq"]}},
    }
    assert module.batching(models).endswith(
        "(--unsorted-batches), except UniLM: length-sorted batches"
    )
    del models["unilm"]
    assert module.batching(models).startswith(
        "pairs in a random order"
    ) and "except" not in module.batching(models)


def _refs(tmp_path):
    path = tmp_path / "refs.txt"
    path.write_text("\n".join(REFS) + "\n")
    return path


def test_paired_bootstrap_agrees_with_a_direct_resampling_loop():
    module = _module("collect_gigaword")
    rng = np.random.default_rng(0)
    a = rng.normal(10, 5, 300)
    b = a - rng.normal(0.4, 3, 300)
    p = module.paired_bootstrap(a, b, seed=7)
    # the same resamples drawn one at a time
    draw = np.random.default_rng(7).integers(0, 300, size=(module.RESAMPLES, 300))
    means = [statistics.fmean((a - b)[row]) for row in draw]
    tail = min(sum(m <= 0 for m in means), sum(m >= 0 for m in means)) / module.RESAMPLES
    assert np.isclose(p, min(1.0, 2 * tail))


def test_point_reads_fairseqs_validation_line(tmp_path):
    module = _module("gigaword_point")
    (tmp_path / "finetune.log").write_text(
        "2026 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 9.1 | nll_loss 8 | "
        "loss_s1 9.0 | acc_s1 11.5 | loss_s2 9.2 | acc_s2 10.25 | ppl 300 | wps 1 | wpb 2 | bsz "
        "3 | num_updates 250\n2026 | INFO | valid | epoch 002 | valid on 'valid' subset | loss "
        "8.1 | acc_s1 15 | acc_s2 12.5 | num_updates 500 | best_loss 8.1\n"
    )
    (tmp_path / "rouge-500.json").write_text(
        json.dumps({"rouge1": 12.0, "rouge2": 3.0, "rougeL": 11.0, "sentences": 3})
    )
    (tmp_path / "hyp-500.title").write_text("a b\na b\nc d\n")
    point = module.write_point(tmp_path, 500, 1.2, 12.0)
    assert (
        point["valid_accuracy_per_stream"] == [15.0, 12.5]
        and point["valid_loss"] == 8.1
        and point["lenpen"] == 1.2
    )
    assert point["distinct_hypotheses"] == 2
    assert json.loads((tmp_path / "points" / "500.json").read_text()) == point
    proc = subprocess.run(
        [
            sys.executable,
            USER_SCRIPTS / "gigaword_point.py",
            "--work",
            tmp_path,
            "--update",
            "750",
            "--lenpen",
            "1.0",
        ],
        capture_output=True,
        text=True,
        env=cli_env(),
    )
    assert (
        proc.returncode == 1
        and "no validation at update 750" in proc.stderr
        and "Traceback" not in proc.stderr
    )


def test_kept_runs_outlive_the_work_folder_and_give_the_same_table(tmp_path):
    module = _module("collect_gigaword")
    for seed, r1 in ((1, 10.0), (2, 12.0)):
        _run(
            tmp_path,
            "p1",
            seed,
            {250: _point(r1 - 5, 30, [10.0]), 500: _point(r1, 35, [20.0])},
            REFS,
        )
        _run(
            tmp_path,
            "p2",
            seed,
            {250: _point(r1, 1, [9.0, 8.0]), 500: _point(r1, 1, [14.0, 12.0])},
            ["the the the"] * 40,
        )
    kept = tmp_path / "kept"
    for folder in sorted((tmp_path / "runs").iterdir()):
        assert not module.is_kept(kept / folder.name, [250, 500])
        proc = subprocess.run(
            [sys.executable, SCRIPT, "--keep", folder, "--kept", kept / folder.name],
            capture_output=True,
            text=True,
            check=True,
            env=cli_env(),
        )
        assert "kept" in proc.stdout
    assert module.is_kept(kept / "p1-s1", [250, 500]) and not module.is_kept(
        kept / "p1-s1", [250, 1000]
    )
    assert module.read_lines(kept / "p1-s1" / "hyp-500.title.gz") == REFS
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--is-kept", kept / "p2-s2", "--eval-at", "250 500"], env=cli_env()
    )
    assert proc.returncode == 0
    assert (
        subprocess.run(
            [sys.executable, SCRIPT, "--is-kept", kept / "p3-s1", "--eval-at", "250"], env=cli_env()
        ).returncode
        == 1
    )
    assert module.summarise(kept, REFS) == module.summarise(tmp_path / "runs", REFS)
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--keep", tmp_path / "nothing", "--kept", kept / "x-s1"],
        capture_output=True,
        text=True,
        env=cli_env(),
    )
    assert (
        proc.returncode == 1
        and "has no results.json" in proc.stderr
        and "Traceback" not in proc.stderr
    )


def test_collect_without_runs_is_one_clear_error(tmp_path):
    (tmp_path / "runs").mkdir()
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--work", tmp_path], capture_output=True, text=True, env=cli_env()
    )
    assert (
        proc.returncode == 1
        and "has a results.json" in proc.stderr
        and "Traceback" not in proc.stderr
    )


def test_bisection_table_reads_the_variants_and_the_fairseq_runs(tmp_path):
    module = _module("collect_gigaword")
    bisect = tmp_path / "bisect"
    for name, seed, r1, distinct in (
        ("hf", 1, 2.4, 1),
        ("ours-unsorted", 1, 11.0, 650),
        ("ours-unsorted", 2, 13.0, 700),
    ):
        (bisect / f"{name}-s{seed}").mkdir(parents=True)
        (bisect / f"{name}-s{seed}" / "results.json").write_text(
            json.dumps(
                {
                    "settings": {"ngram": 2},
                    "points": {"500": _point(r1, distinct, [15.0 + seed, 12.8])},
                }
            )
        )
    _run(
        tmp_path,
        "p2",
        1,
        {250: _point(5.0, 1, [12.0, 11.0]), 500: _point(2.38, 1, [14.6, 12.0])},
        REFS,
    )
    (tmp_path / "kept").mkdir()
    (tmp_path / "runs").rename(
        tmp_path / "kept" / "sorted"
    )  # compare_gigaword.sh's kept runs, by batching
    page = tmp_path / "prophetnet.md"
    page.write_text("a\n<!-- bisection:start -->\n<!-- bisection:end -->\nb\n")
    subprocess.run(
        [
            sys.executable,
            SCRIPT,
            "--bisection",
            bisect,
            "--runs",
            tmp_path / "kept",
            "--publish",
            tmp_path / "published",
            "--page",
            page,
        ],
        check=True,
        capture_output=True,
        text=True,
        env=cli_env(),
    )
    summary = json.loads((bisect / "bisection.json").read_text())
    assert list(summary["variants"]) == ["fairseq-train", "hf", "ours-unsorted"]
    assert list(summary["variants"]["ours-unsorted"]["seeds"]) == ["1", "2"]
    lines = page.read_text().splitlines()
    assert lines[2].startswith("| variant (n = 2) | seeds | 250 updates") and len(lines) == 9
    assert (
        lines[4]
        == "| " + module.BISECTION["fairseq-train"] + " | 1 | 5.00 / 1 / 12.0 | 2.38 / 1 / 14.6 |"
    )
    assert lines[6].endswith("| 1, 2 |  | 12.00 / 650, 700 / 16.5 |")


def test_bisection_keeps_published_rows_whose_runs_are_gone(tmp_path):
    """A fresh work folder: variants with runs on disk are read from them, the others keep their
    rows from the published bisection.json (seeds and points as numbers again)."""
    bisect, published = tmp_path / "bisect", tmp_path / "published"
    (bisect / "ours-fairseq-unsorted-s1").mkdir(parents=True)
    (bisect / "ours-fairseq-unsorted-s1" / "results.json").write_text(
        json.dumps({"points": {"500": _point(10.0, 480, [17.0, 14.0])}})
    )
    published.mkdir()
    old_point = {
        "rouge1_f1": 11.83,
        "distinct_hypotheses": 725,
        "valid_accuracy_per_stream": [18.4, 15.0],
    }
    (published / "bisection.json").write_text(
        json.dumps(
            {
                "variants": {
                    "hf-unsorted": {
                        "label": "old label",
                        "seeds": {"1": {"commands": ["x"], "points": {"500": old_point}}},
                    },
                    "ours-fairseq-unsorted": {
                        "label": "stale",
                        "seeds": {"7": {"commands": ["y"], "points": {"500": old_point}}},
                    },
                }
            }
        )
    )
    (tmp_path / "kept").mkdir()
    subprocess.run(
        [
            sys.executable,
            SCRIPT,
            "--bisection",
            bisect,
            "--runs",
            tmp_path / "kept",
            "--publish",
            published,
        ],
        check=True,
        capture_output=True,
        text=True,
        env=cli_env(),
    )
    variants = json.loads((published / "bisection.json").read_text())["variants"]
    assert list(variants) == ["hf-unsorted", "ours-fairseq-unsorted"]
    assert variants["hf-unsorted"]["seeds"] == {
        "1": {"commands": ["x"], "points": {"500": old_point}}
    }
    assert list(variants["ours-fairseq-unsorted"]["seeds"]) == [
        "1"
    ]  # on disk wins over the published row
    assert variants["ours-fairseq-unsorted"]["seeds"]["1"]["points"]["500"]["rouge1_f1"] == 10.0


def test_unilm_pretrained_table_uses_the_same_collector(tmp_path):
    """reproduction/unilm/collect_pretrained.py: its rows, its comparisons (each MiniLM start
    against the random start with the same vocabulary) and its results-page block."""
    for name, r1, hyps in (("minilm", 20.0, REFS), ("random", 3.0, ["the the the"] * 40)):
        for seed in (1, 2):
            _run(
                tmp_path,
                name,
                seed,
                {250: _point(r1 / 2, 30, [30.0]), 500: _point(r1 + seed, 35, [40.0])},
                hyps,
            )
    page = tmp_path / "unilm.md"
    page.write_text("a\n<!-- unilm-pretrained:start -->\nold\n<!-- unilm-pretrained:end -->\nb\n")
    proc = subprocess.run(
        [
            sys.executable,
            ROOT / "reproduction" / "unilm" / "collect_pretrained.py",
            "--runs",
            tmp_path / "runs",
            "--refs",
            _refs(tmp_path),
            "--out",
            tmp_path / "out",
            "--page",
            page,
        ],
        capture_output=True,
        text=True,
        check=True,
        env=cli_env(),
    )
    summary = json.loads((tmp_path / "out" / "pretrained_results.json").read_text())
    assert list(summary["models"]) == ["minilm", "random"]
    [c500] = [c for c in summary["comparisons"] if c["update"] == 500]
    assert (c500["model"], c500["baseline"], c500["verdict"]) == ("minilm", "random", "better")
    text = page.read_text()
    assert (
        "| from MiniLM | 2 | 500 | 21.50 ± 0.71 |" in text
        and "old" not in text
        and text.endswith("end -->\nb\n")
    )
    assert "from MiniLM" in proc.stdout


def test_keeping_a_run_again_leaves_its_files_byte_for_byte(tmp_path):
    import time

    module = _module("collect_gigaword")
    _run(tmp_path, "p1", 1, {250: _point(5.0, 30, [10.0])}, REFS)
    run, dest = tmp_path / "runs" / "p1-s1", tmp_path / "kept" / "p1-s1"
    module.keep(run, dest)
    first = (dest / "hyp-250.title.gz").read_bytes()
    time.sleep(1.1)  # a time stamp in the gzip header would differ now
    module.keep(run, dest)
    assert (dest / "hyp-250.title.gz").read_bytes() == first
    assert gzip.decompress(first).decode().splitlines() == REFS
    assert json.loads((dest / "results.json").read_text())["points_done"] == [250]


def test_kept_commands_are_relative_to_the_repository(tmp_path):
    """examples/unilm/gigaword.sh logs absolute paths; the kept results file names them from the
    repository root, as every results file does."""
    module = _module("collect_gigaword")
    folder = tmp_path / "runs" / "unilm-s1"
    folder.mkdir(parents=True)
    (folder / "hyp-500.title").write_text("\n".join(REFS) + "\n")
    folder.joinpath("results.json").write_text(
        json.dumps(
            {
                "updates": 500,
                "rouge1_f1": 5.0,
                "rouge2_f1": 1.0,
                "rougeL_f1": 4.5,
                "commands": [
                    f"bash {ROOT}/data_prep/gigaword.sh --out {ROOT}/work/x",
                    f"fairseq-train --user-dir {ROOT}",
                ],
            }
        )
    )
    module.keep(folder, tmp_path / "kept" / "unilm-s1")
    kept = json.loads((tmp_path / "kept" / "unilm-s1" / "results.json").read_text())
    assert kept["commands"] == [
        "bash data_prep/gigaword.sh --out work/x",
        "fairseq-train --user-dir .",
    ]

"""reproduction/gigaword_10k/driver.py and collect.py: the early-stopping rule, the length-penalty
choice, the English corpus filter, and the driver end to end at tiny scale on a made-up
Gigaword folder (data prep by data_prep/gigaword.sh, span pre-training, chunked fine-tuning with
patience 2, the length penalty chosen on valid, test decoded once, one kept JSON per run), its
resumption after an interruption, and the collector's page block."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
from types import SimpleNamespace

import pytest

from reproduction import convergence
from reproduction.gigaword_10k import collect, driver, page, protocol
from reproduction.tests.conftest import fork_commands_of
from reproduction.tests.gigaword_tiny import make_english, make_gigaword

SIZES = (
    "--encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 32 --decoder-embed-dim 32 "
    "--encoder-ffn-embed-dim 64 --decoder-ffn-embed-dim 64 --encoder-attention-heads 2 "
    "--decoder-attention-heads 2"
)


def curve(*scores):
    return [{"update": 10 * (i + 1), "rouge1": s} for i, s in enumerate(scores)]


def test_early_stopping_waits_patience_validations_after_the_best():
    assert not driver.should_stop([], 2)
    assert not driver.should_stop(curve(10, 12, 11), 2)  # one validation without a better one
    assert driver.should_stop(curve(10, 12, 11, 12), 2)  # a tie is no improvement
    assert not driver.should_stop(curve(10, 12, 11, 13), 2)  # improved: the count starts again
    assert not driver.should_stop(curve(10, 12, 11, 12), 3)
    assert driver.best_index(curve(10, 12, 11, 12)) == 1  # the earliest of equal scores
    with pytest.raises(ValueError):
        driver.should_stop(curve(1), 1)


def test_next_chunk_continues_from_the_curve_and_respects_the_cap():
    assert driver.next_chunk([], 10, 30, 2) == 10
    assert (
        driver.next_chunk(curve(1, 2), 10, 30, 2) == 30
    )  # a resumed run trains on from its last validation
    assert driver.next_chunk(curve(1, 2, 3), 10, 30, 2) is None  # the cap
    assert driver.next_chunk(curve(5, 1, 1), 10, 100, 2) is None  # patience


def test_seconds_per_update_is_the_median_over_chunks_of_every_run():
    """A chunk's rate is its seconds over the updates since the previous validation; a first chunk
    resumed near its end (100 s for 500 updates) is set aside by the median."""
    runs = [
        {"curve": [{"update": 500, "train_seconds": 100}, {"update": 1000, "train_seconds": 1000}]},
        {
            "curve": [
                {"update": 500, "train_seconds": 1100},
                {"update": 1000, "train_seconds": 1050},
            ]
        },
    ]
    assert collect.seconds_per_update(runs) == 2.05  # rates 0.2, 2.0, 2.2, 2.1


def test_cost_is_given_machine_by_machine_and_never_pooled():
    """Seeds 1 and 2 ran on machine A, seed 3 on machine B: each machine's medians come from its own
    runs only, a row's seeds are named where only some ran on a machine, and the wall time of all
    runs is split by machine (one machine: named once)."""

    def run(seed, machine, chunk_seconds, decode_seconds):
        return {
            "seed": seed,
            "hardware": machine,
            "wall_seconds": 3600.0,
            "curve": [
                {"update": u, "train_seconds": chunk_seconds, "decode_seconds": decode_seconds}
                for u in (500, 1000)
            ],
        }

    cost = collect.cost_by_machine(
        [run(1, "A", 1000, 80), run(2, "A", 900, 90), run(3, "B", 500, 30)]
    )
    assert cost == {
        "A": {
            "seeds": [1, 2],
            "seconds_per_update": 1.9,
            "seconds_per_validation": 85.0,
            "wall_seconds": 7200.0,
        },
        "B": {
            "seeds": [3],
            "seconds_per_update": 1.0,
            "seconds_per_validation": 30.0,
            "wall_seconds": 3600.0,
        },
    }
    alone = collect.cost_by_machine([run(1, "A", 600, 20)])
    models = {
        "u": {"label": "U", "seeds": [1, 2, 3], "cost": cost},
        "p": {"label": "P", "seeds": [1], "cost": alone},
    }
    costs, hours = page.cost_notes(models)
    assert costs == [
        "- on A: U (seeds 1, 2): 1.90 s an update, 85 s a validation; P: 1.20 s an update, 20 s "
        "a validation.",
        "- on B: U (seed 3): 1.00 s an update, 30 s a validation.",
    ]
    assert hours == "4.0 h (A: 3.0 h; B: 1.0 h)"
    assert page.cost_notes({"p": models["p"]}) == (
        ["- on A: P: 1.20 s an update, 20 s a validation."],
        "1.0 h (A)",
    )


def test_a_run_resumed_on_another_machine_names_both(tmp_path):
    """Each call adds its machine to the run's state once; the record names them in order."""
    state_file, last = tmp_path / "state.json", tmp_path / "checkpoint_last.pt"
    state = {"seconds": 0.0, "sessions": 0}
    driver.RunClock(state_file, last, state, "A").save()
    driver.RunClock(state_file, last, state, "A")
    assert driver.RunClock(state_file, last, state, "B").machines() == "A then B"
    assert state["sessions"] == 3 and json.loads(state_file.read_text())["machines"] == ["A"]


def test_a_killed_call_is_credited_its_training_up_to_its_last_checkpoint(tmp_path):
    """The state is saved at a call's start and at each validation; a checkpoint written after it
    holds training that no saved state counts."""
    state, last = tmp_path / "state.json", tmp_path / "checkpoint_last.pt"
    assert convergence.seconds_after_state(state, last) == 0.0  # neither file: nothing was trained
    state.write_text("{}"), last.write_bytes(b"")
    os.utime(state, (1000, 1000)), os.utime(last, (1612.34, 1612.34))
    assert convergence.seconds_after_state(state, last) == 612.3
    os.utime(
        last, (900, 900)
    )  # the checkpoint of the last validation, older than the state saved after it
    assert convergence.seconds_after_state(state, last) == 0.0


def test_a_claim_is_decided_only_when_each_trained_row_has_three_seeds():
    """Below protocol.SEEDS_FOR_A_VERDICT seeds of a trained row the numbers so far are kept and the
    claim stays open; lead-8 has no seeds and never holds a claim back."""

    def run(seed, scores, stopped="patience"):
        return {
            "test_sentence_rouge1": scores,
            "test": {"rouge1": sum(scores) / len(scores)},
            "seed": seed,
            "stopped": stopped,
        }

    lead8 = [10.0] * 40
    runs = {
        "unilm-minilm": {s: run(s, [30.0 + s] * 40) for s in (1, 2)},
        "unilm-random": {1: run(1, [20.0] * 40)},
    }
    verdicts = {
        (c["row"], c["baseline"]): c for c in collect.compare(runs, lead8) if "margin" not in c
    }
    above_lead, start = (
        verdicts[("unilm-minilm", "lead-8")],
        verdicts[("unilm-minilm", "unilm-random")],
    )
    assert (
        above_lead["verdict"] == "not decided: unilm-minilm has 2 of 3 seeds"
        and above_lead["delta_rouge1"] == 21.5
    )
    assert (
        start["verdict"]
        == "not decided: unilm-minilm has 2 of 3 seeds and unilm-random has 1 of 3 seeds"
    )
    assert verdicts[("p2-pt", "p1-pt")]["verdict"] == "not decided: p2-pt and p1-pt not run yet"
    runs["unilm-minilm"][3] = run(3, [33.0] * 40, stopped="max-updates (not converged)")
    runs["unilm-random"].update({s: run(s, [20.0] * 40) for s in (2, 3)})
    verdicts = {
        (c["row"], c["baseline"]): c for c in collect.compare(runs, lead8) if "margin" not in c
    }
    assert (
        verdicts[("unilm-minilm", "lead-8")]["verdict"]
        == verdicts[("unilm-minilm", "unilm-random")]["verdict"]
        == "yes"
    )
    assert above_lead["at_a_cap"] == {} and verdicts[("unilm-minilm", "unilm-random")][
        "at_a_cap"
    ] == {"unilm-minilm": [3]}
    summary = page.so_far(above_lead) + page.so_far(verdicts[("unilm-minilm", "lead-8")])
    assert summary == "so far: "


def test_a_claim_with_a_margin_tests_the_difference_against_the_margin(monkeypatch):
    """ "At least 3 points above lead-8": +4 with little spread is shown, +2 with little spread is
    shown to fall short, +3 with a wide spread is not shown either way; a seeded baseline's t-test
    is of the per-seed differences less the margin (scipy's one-sample t-test as the reference)."""
    from scipy import stats

    def run(seed, scores):
        return {
            "test_sentence_rouge1": scores,
            "test": {"rouge1": sum(scores) / len(scores)},
            "seed": seed,
            "stopped": "patience",
        }

    lead8 = [10.0, 20.0] * 40

    def margin_verdict(gain):
        runs = {
            "unilm-minilm": {s: run(s, [x + g for x, g in zip(lead8, gain)]) for s in (1, 2, 3)}
        }
        return next(c for c in collect.compare(runs, lead8) if c.get("margin") == 3.0)

    assert margin_verdict([4.0, 4.2] * 40)["verdict"] == "yes"
    short = margin_verdict([2.0, 2.2] * 40)
    assert (
        short["verdict"] == "no: significantly less than 3 points" and short["delta_rouge1"] == 2.1
    )
    assert (
        margin_verdict([8.0, -2.0] * 40)["verdict"]
        == "not shown: not significantly more than 3 points"
    )
    assert page.against(short) == " against a margin of 3" and page.against({"margin": None}) == ""

    monkeypatch.setattr(collect, "CLAIMS", [("p2", "p1", "n = 2 is 1 point above n = 1", 1.0)])
    p1 = {s: run(s, [20.0 + s] * 40) for s in (1, 2, 3)}
    p2 = {s: run(s, [21.5 + s + 0.3 * (s == 2)] * 40) for s in (1, 2, 3)}
    [c] = collect.compare({"p1": p1, "p2": p2}, lead8)
    differences = [p2[s]["test"]["rouge1"] - p1[s]["test"]["rouge1"] - 1.0 for s in (1, 2, 3)]
    assert c["t_test_p"] == round(float(stats.ttest_1samp(differences, 0.0).pvalue), 4)
    assert c["t_test_p"] < 0.05 and c["verdict"] == "yes"


def test_the_ngram_reading_says_where_the_gap_after_pre_training_comes_from():
    """The n = 2 against n = 1 gap after pre-training is read beside what pre-training does to each
    n: it is n = 1's loss when n = 1 falls and n = 2 does not gain, not when n = 2 gains; nothing
    is read before the three claims are decided."""

    def claim(row, baseline, verdict, delta, decided=True):
        return {
            "row": row,
            "baseline": baseline,
            "verdict": verdict,
            "delta_rouge1": delta,
            "decided": decided,
        }

    collapse = [
        claim("p2-pt", "p1-pt", "yes", 12.0),
        claim("p1-pt", "p1", "no, the opposite", -13.0),
        claim("p2-pt", "p2", "no significant difference", 0.1),
        claim("p2", "p1", "yes", 0.5),
    ]
    text = page.ngram_reading(collapse)[1]
    assert text.startswith(
        "Read together for ProphetNet's claim: after span pre-training, n = 2 against n = 1: "
        '"yes" (+12.00); span pre-training against none: for n = 1 "no, the opposite" (-13.00), '
        'for n = 2 "no significant difference" (+0.10).'
    )
    assert "n = 1 losing from span pre-training, not n = 2 gaining from it" in text
    gains = [*collapse[:2], claim("p2-pt", "p2", "yes", 3.0)]
    assert page.ngram_reading(gains)[1].endswith('for n = 2 "yes" (+3.00).')
    assert (
        page.ngram_reading([*collapse[:2], {**collapse[2], "decided": False}])
        == []
        == page.ngram_reading(collapse[1:])
    )
    kept = json.loads(protocol.RESULTS.read_text())
    assert page.ngram_reading(kept["comparisons"])[1] in page.markdown(kept)


def test_a_difference_is_established_only_when_both_the_sentences_and_the_seeds_show_it(
    monkeypatch,
):
    """Every test sentence is 0.6 higher on average over seeds (bootstrap p ~ 0), but the per-seed
    differences are +2.0, -0.5, +0.3: a t-test paired by seed (p ~ 0.5) does not show it, so
    neither does the verdict; a lead-8 claim, with no seeds, rests on the bootstrap alone; seeds
    that agree over sentences that do not are not enough either; and the table and the summary
    give both tests' p-values."""

    def run(seed, score):
        return {
            "test_sentence_rouge1": [score] * 40,
            "test": {"rouge1": score},
            "seed": seed,
            "stopped": "patience",
        }

    monkeypatch.setattr(
        collect,
        "CLAIMS",
        [("p2", "p1", "n = 2 beats n = 1", 0.0), ("p2", "lead-8", "above lead-8", 0.0)],
    )
    p1 = {s: run(s, 20.0 + s) for s in (1, 2, 3)}
    p2 = {1: run(1, 23.0), 2: run(2, 21.5), 3: run(3, 23.3)}
    against_p1, against_lead = collect.compare({"p1": p1, "p2": p2}, [20.0] * 40)
    assert (
        against_p1["delta_rouge1"] == 0.6
        and against_p1["bootstrap_p"] < 0.05
        and against_p1["t_test_p"] > 0.05
    )
    assert (
        against_p1["verdict"] == "not shown: significant over the test sentences, not across seeds"
    )
    assert "t_test_p" not in against_lead and against_lead["verdict"] == "yes"
    assert collect.verdict(-1.0, 0.01, 0.0, 0.01) == "no, the opposite"
    assert collect.verdict(-1.0, 0.01, 0.0, 0.2) == collect.verdict(1.0, 0.01, 0.0, 0.2) != "yes"
    # the other way round: seeds that agree in sign (t-test p < 0.05) over sentences that do not
    assert (
        collect.verdict(0.1, 0.5, 0.0, 0.01)
        == "not shown: significant across seeds, not over the test sentences"
    )
    assert (
        collect.verdict(0.1, 0.5, 0.0, 0.2)
        == collect.verdict(0.1, 0.5, 0.0)
        == "no significant difference"
    )
    assert collect.verdict(0.1, 0.5, 3.0, 0.01) == "not shown: not significantly more than 3 points"
    # the table's notes and the summary's claims line both give the t-test beside the bootstrap,
    # where there is one
    assert (
        page.p_values(against_p1)
        == f"bootstrap {page.p_value(against_p1['bootstrap_p'], against_p1['resamples'])}, "
        f"t-test p = {against_p1['t_test_p']:.3f}"
        and page.p_values(against_lead) == "bootstrap p < 0.001"
    )
    kept = json.loads(protocol.RESULTS.read_text())
    claims = next(line for line in page.summary(kept).splitlines() if line.startswith("- Claims: "))
    assert [page.p_values(c) in claims for c in kept["comparisons"] if "delta_rouge1" in c].count(
        True
    ) >= 2
    assert all(page.p_values(c) in claims for c in kept["comparisons"] if "t_test_p" in c)


def test_a_run_ended_by_early_stopping_is_kept_under_any_cap_it_did_not_reach():
    settings = {"lr": "7e-4", "max_updates": 3500}
    stopped = {
        "settings": settings,
        "stopped": "patience",
        "curve": curve(1, 3, 2, 2, 2),
    }  # last validation: update 50
    capped = {**stopped, "stopped": "max-updates (not converged)"}
    assert driver.same_run(stopped, settings) and driver.same_run(
        stopped, {**settings, "max_updates": 10000}
    )
    assert driver.same_run(stopped, {**settings, "max_updates": 50})
    assert not driver.same_run(
        stopped, {**settings, "max_updates": 40}
    )  # it would have stopped at the cap
    assert not driver.same_run(stopped, {"lr": "2e-4", "max_updates": 10000})
    assert driver.same_run(capped, settings) and not driver.same_run(
        capped, {**settings, "max_updates": 10000}
    )


def test_a_row_whose_runs_stopped_for_different_reasons_names_the_seeds_of_each():
    row = {
        "seeds": [1, 2, 3],
        "caps": [3500, 10000, 10000],
        "stopped": ["max-updates (not converged)", "patience", "max-updates (not converged)"],
        "patience": 3,
    }
    assert page.stopped_by(row) == (
        "stopped at the cap of 3500 updates, not converged (seed 1), at the cap of "
        "10000 updates, not converged (seed 3) and by early stopping (patience 3; seed 2)"
    )
    assert (
        page.stopped_by({**row, "stopped": ["patience"] * 3})
        == "stopped by early stopping (patience 3)"
    )
    capped = ["max-updates (not converged)"] * 3
    assert (
        page.stopped_by({**row, "caps": [3500] * 3, "stopped": capped})
        == "stopped at the cap of 3500 updates, not converged"
    )
    assert page.stopped_by(
        {**row, "caps": [3500] * 3, "stopped": capped[:1] + ["patience"] * 2}
    ) == (
        "stopped at the cap of 3500 updates, not converged (seed 1) and by early stopping "
        "(patience 3; seeds 2, 3)"
    )


def test_length_penalty_is_chosen_by_valid_rouge1_ties_nearest_one():
    grid = {"0.6": {"rouge1": 30.0}, "1.0": {"rouge1": 31.0}, "1.5": {"rouge1": 31.0}}
    assert driver.choose_lenpen(grid) == "1.0"
    assert driver.choose_lenpen({**grid, "1.2": {"rouge1": 31.5}}) == "1.2"


@pytest.fixture(autouse=True)
def _forked_commands(monkeypatch):
    """The driver's data preparation (data_prep/gigaword.sh, MiniLM's extraction and conversion)
    with fairseq's commands and the plugin's programs forked from the tests' server."""
    fork_commands_of(monkeypatch, driver)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("giga10k")
    return {
        "data": make_gigaword(root / "gigaword"),
        "english": make_english(root / "english"),
        "work": root / "work",
        "kept": root / "kept",
    }


def own_work(argv: list, tiny, tmp_path) -> list:
    """ARGV with a work folder of its own, holding a copy of the prepared data: no run folder left
    by another test (a run stopped at the cap keeps its folder) meets this test's settings. The
    shared folder's data are prepared first when no earlier test has (a test run on its own)."""
    a = driver.parser().parse_args(argv)
    a.lr_grid = {}
    driver.Driver(a).prepare(a.rows)
    shutil.copytree(tiny["work"] / "data", tmp_path / "work" / "data")
    argv[argv.index("--work") + 1] = str(tmp_path / "work")
    return argv


def args(tiny, *rows, patience=2, kept=None):
    return [
        "--data",
        str(tiny["data"]),
        "--english",
        str(tiny["english"]),
        "--work",
        str(tiny["work"]),
        "--kept",
        str(kept or tiny["kept"]),
        "--rows",
        *rows,
        "--seeds",
        "1",
        "--chunk",
        "2",
        "--patience",
        str(patience),
        "--max-updates",
        "10",
        "--lenpens",
        "1.0",
        "1.5",
        "--vocab",
        "60",
        "--max-tokens",
        "256",
        f"--sizes={SIZES}",
        "--pretrain-updates",
        "4",
        "--pretrain-chunk",
        "2",
        "--in-process",
    ]


def with_cap(argv: list, n: int) -> list:
    """ARGV asking for --max-updates N."""
    out = list(argv)
    out[out.index("--max-updates") + 1] = str(n)
    return out


def test_driver_end_to_end_keeps_one_json_per_run_and_the_page_renders(tiny, monkeypatch, tmp_path):
    decoded = []
    generate = driver.fairseq_generate
    monkeypatch.setattr(
        driver,
        "fairseq_generate",
        lambda argv, out: (
            decoded.append(argv[argv.index("--gen-subset") + 1]) or generate(argv, out)
        ),
    )
    driver.main(args(tiny, "transformer", "p1-pt"))
    kept = tiny["kept"]
    pre = json.loads((kept / "pretrain-p1.json").read_text())
    assert pre["updates"] == 4 and pre["corpus"]["lines"] > 40
    assert {s["file"] for s in pre["corpus"]["sources"]} == {
        "wikitext-2-raw/wiki.valid.raw",
        "wmt16_en_ro/newsdev2016.en",
        "GIGAWORD/train10k.article.txt",
    }
    assert decoded.count("test") == 2  # once per run
    for row in ("transformer", "p1-pt"):
        r = json.loads((kept / f"{row}-s1.json").read_text())
        c = r["curve"]
        assert [p["update"] for p in c] == list(range(2, 2 * len(c) + 1, 2)) and len(c) >= 3
        assert (r["stopped"] == "patience") == driver.should_stop(c, 2)
        assert r["chosen_update"] == c[driver.best_index(c)]["update"]
        assert (
            set(r["lenpen_grid"]) == {"1.0", "1.5"}
            and r["valid"] == r["lenpen_grid"][r["chosen_lenpen"]]
        )
        assert r["test_sentences"] == len(r["test_sentence_rouge1"]) == 6
        assert "fairseq-train" in r["commands"]["fairseq-train"] and r["seed"] == 1
        with gzip.open(kept / f"{row}-s1.test.txt.gz", "rt") as f:
            assert len(f.read().splitlines()) == 6
        # the work folder goes once kept, unless the run stopped at the cap (a higher cap extends
        # it)
        assert (tiny["work"] / "runs" / f"{row}-s1").exists() == (r["stopped"] != "patience")
    assert json.loads((kept / "p1-pt-s1.json").read_text())["pretraining"] == "pretrain-p1.json"
    # a second call finds the kept runs and trains nothing; other settings are refused
    monkeypatch.setattr(
        driver, "fairseq_train", lambda argv: pytest.fail("a kept run was trained again")
    )
    driver.main(args(tiny, "transformer", "p1-pt"))
    with pytest.raises(SystemExit, match="other settings"):
        driver.main(args(tiny, "transformer", patience=3))
    with pytest.raises(
        SystemExit, match="give another --work folder"
    ):  # the data were made for all of valid1k
        driver.main([*args(tiny, "transformer"), "--valid-lines", "4"])
    # the collector: the rows, the verdicts, the rest of the block as the page renders it
    results = collect.collect(kept, json.loads(protocol.RESULTS.read_text()), None)
    assert set(results["models"]) == {"transformer", "p1-pt"} and results["lead"]["chosen_n"] == 17
    text = page.markdown(results)
    row = results["models"]["p1-pt"]
    assert (
        f"| ProphetNet n = 1, span pre-training | {row['test']['rouge1'][0]:.2f} |" in text
    )  # one seed: no spread
    distinct = json.loads((kept / "p1-pt-s1.json").read_text())["test_distinct"]
    assert (
        f"; distinct test headlines {distinct} of 6; " in text
    )  # a model that writes one headline for all shows it
    assert "| UniLM from MiniLM | not run yet |" in text
    assert (
        "- UniLM from MiniLM is above lead-8 on test: not decided: unilm-minilm not run yet."
        in text
    )
    assert any(c["row"] == "p1" and c["baseline"] == "transformer" for c in results["comparisons"])
    gap = row["test"]["rouge1"][0] - results["lead"]["test"]["lead-8"]["rouge1"]
    assert f"- ProphetNet n = 1, span pre-training: {gap:+.2f} to lead-8, " in text
    summary = page.summary(results)
    why = (
        "stopped at the cap of 10 updates, not converged"
        if row["stopped"] == ["max-updates (not converged)"]
        else "stopped by early stopping (patience 2)"
    )
    trained = next(line for line in summary.splitlines() if line.startswith("- Trained rows: "))
    assert (
        f"ProphetNet n = 1, span pre-training {row['test']['rouge1'][0]:.2f} (1 seed, {why}: "
        in trained
    )
    assert "- Not run yet: ProphetNet n = 1, no pre-training; " in summary
    assert (
        "; so not decided: UniLM from MiniLM is above lead-8 on test; UniLM from MiniLM is at "
        "least 3 ROUGE-1 above lead-8 on test (the issue's bar: several points); a MiniLM start "
        "beats a random start (UniLM, Dong et al. 2019; Su 2019); " in summary
    )
    assert "- Claims:" not in summary  # no claim compares transformer with p1-pt
    pt = results["pretraining"]["pretrain-p1"]  # in-process: no worker log, so no loss curve
    assert pt["updates"] == 4 and pt["sessions"] == 1 and "loss_first" not in pt
    machine = pt["hardware"].split(",")[0]
    assert (
        f"n = 1: 4 updates, 0.0 h in 1 call on {machine}. The training loss is the criterion's"
        in text
    )
    assert f"Its corpus: {pre['corpus']['lines']:,} lines" in text
    page_file = tmp_path / "page.md"
    page_file.write_text(
        f"x\n{protocol.SUMMARY_MARKERS[0]}\nold\n{protocol.SUMMARY_MARKERS[1]}\n{protocol.START}\nold\n"
        f"{protocol.END}\ny\n"
    )
    (tmp_path / "r.json").write_text(protocol.RESULTS.read_text())
    collect.main(
        [
            "--kept",
            str(kept),
            "--results",
            str(tmp_path / "r.json"),
            "--page",
            str(page_file),
            "--figure",
            str(tmp_path / "f.png"),
        ]
    )
    written = json.loads((tmp_path / "r.json").read_text())
    assert page.markdown(written) in page_file.read_text()
    assert page.summary(written) in page_file.read_text()


def test_an_interrupted_run_resumes_from_its_last_validation(tiny, monkeypatch, tmp_path):
    trained, decodes = [], []
    train, generate = driver.fairseq_train, driver.fairseq_generate

    def crash_on_second_decode(argv, out):
        decodes.append(1)
        if len(decodes) == 2:
            raise KeyboardInterrupt("interrupted")
        return generate(argv, out)

    monkeypatch.setattr(
        driver, "fairseq_train", lambda argv: trained.append(argv[-1]) or train(argv)
    )
    monkeypatch.setattr(driver, "fairseq_generate", crash_on_second_decode)
    kept = tmp_path / "kept"
    with pytest.raises(KeyboardInterrupt):
        driver.main(args(tiny, "p1", kept=kept))
    state = json.loads((tiny["work"] / "runs" / "p1-s1" / "state.json").read_text())
    assert [p["update"] for p in state["curve"]] == [2] and trained == [2, 4]
    assert (tiny["work"] / "runs" / "p1-s1" / "best.pt").is_file()
    assert (
        state.pop("batches_per_epoch_from") == 0
    )  # a new run: every update's batches cut per epoch
    # as a run started before --unsorted-batches cut per epoch: the rule begins where it resumes
    (tiny["work"] / "runs" / "p1-s1" / "state.json").write_text(json.dumps(state))
    monkeypatch.setattr(driver, "fairseq_generate", generate)
    driver.main(args(tiny, "p1", kept=kept))
    record = json.loads((kept / "p1-s1.json").read_text())
    assert (
        trained[2] == 6
    )  # the chunk trained before the interruption is decoded, not trained again or from 0
    assert [p["update"] for p in record["curve"]][:2] == [2, 4] and record["sessions"] == 2
    assert record["batches_per_epoch_from"] == 4  # the collector's batches note reads it


def test_a_run_killed_mid_chunk_continues_from_its_checkpoint_within_the_chunk(
    tiny, monkeypatch, tmp_path
):
    """With --checkpoint-every 1, a process killed after update 1 of the first chunk (of 2) leaves a
    checkpoint there, and the next call trains on from it, not from 0."""
    train, started = driver.fairseq_train, []
    save_dir = tiny["work"] / "runs" / "p2-s1" / "checkpoints"

    def killed_after_update_1(argv):
        train([*argv, "--max-update", "1"])
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(driver, "fairseq_train", killed_after_update_1)
    argv = [*args(tiny, "p2", kept=tmp_path / "kept"), "--checkpoint-every", "1"]
    with pytest.raises(KeyboardInterrupt):
        driver.main(argv)
    assert {p.name for p in save_dir.glob("checkpoint*.pt")} == {
        "checkpoint_1_1.pt",
        "checkpoint_last.pt",
    }
    state_file = (
        save_dir.parent / "state.json"
    )  # saved at the call's start: the killed training is credited from it
    assert json.loads(state_file.read_text())["sessions"] == 1
    assert (
        json.loads(state_file.read_text())["batches_per_epoch_from"] == 0
    )  # kept through the kill, where it began
    assert convergence.seconds_after_state(state_file, save_dir / "checkpoint_last.pt") > 0
    monkeypatch.setattr(
        driver,
        "fairseq_train",
        lambda argv: (
            started.append(driver.checkpoint_updates(save_dir / "checkpoint_last.pt"))
            or train(argv)
        ),
    )
    driver.main(argv)
    record = json.loads((tmp_path / "kept" / "p2-s1.json").read_text())
    assert started[0] == 1 and record["curve"][0]["update"] == 2
    assert (
        "--save-interval-updates 1 --keep-interval-updates 1" in record["commands"]["fairseq-train"]
    )


def test_a_learning_rate_grid_is_probed_with_seed_0_and_chosen_on_valid(
    tiny, monkeypatch, tmp_path
):
    decoded = []
    generate = driver.fairseq_generate
    monkeypatch.setattr(
        driver,
        "fairseq_generate",
        lambda argv, out: (
            decoded.append(argv[argv.index("--gen-subset") + 1]) or generate(argv, out)
        ),
    )
    kept = tmp_path / "kept"
    argv = own_work(args(tiny, "transformer", kept=kept), tiny, tmp_path)
    driver.main([*argv, "--lr-grid", "transformer=1e-3,1e-5"])
    probes = {
        lr: json.loads((kept / "lr-grid" / f"transformer-lr{lr}-s0.json").read_text())
        for lr in ("1e-3", "1e-5")
    }
    assert all(
        p["seed"] == 0 and "test" not in p and "--lr " + p["lr"] in p["command"]
        for p in probes.values()
    )
    assert all(
        p["batches_per_epoch_from"] == 0 for p in probes.values()
    )  # so the page names no probe as cut per start
    chosen = max(("1e-3", "1e-5"), key=lambda lr: (probes[lr]["valid"]["rouge1"], lr == "1e-3"))
    record = json.loads((kept / "transformer-s1.json").read_text())
    assert (
        record["settings"]["lr"] == record["recipe"]["lr"] == chosen
        and f"--lr {chosen} " in record["commands"]["fairseq-train"]
    )
    assert decoded.count("test") == 1  # the probes never see the test set
    # asked again without the grid, the row is refused before anything runs: it would train at the
    # recipe's rate
    with pytest.raises(SystemExit) as refused:
        driver.main([*argv, "--seeds", "2"])
    assert str(refused.value) == (
        f"transformer: its learning-rate probes are kept in {driver.rel(kept / 'lr-grid')} "
        "(1e-5, 1e-3); its runs train at the rate they chose: add --lr-grid "
        "transformer=1e-5,1e-3"
    )
    assert not (tmp_path / "work" / "runs" / "transformer-s2").exists()
    text = page.markdown(collect.collect(kept, json.loads(protocol.RESULTS.read_text()), None))
    p = probes["1e-5"]
    distinct = next(c["distinct"] for c in p["curve"] if c["update"] == p["chosen_update"])
    assert (
        f"lr 1e-5: {p['valid']['rouge1']:.2f} at update {p['chosen_update']} ({distinct} "
        "distinct headlines; stopped " in text
    ) and f"; the row's runs so far use lr {chosen}." in text


def test_unilm_rows_run_on_wordpiece_from_minilm_and_at_random(tiny, tmp_path):
    pytest.importorskip("all_minilm_l6_v2")
    kept = tmp_path / "kept"
    # one length penalty (the grid is the end-to-end test's): no second decode of valid
    one_lenpen = ["--lenpens", "1.0"]
    base = [x for x in args(tiny, "unilm-minilm", kept=kept) if not x.startswith("--sizes")]
    driver.main(
        [*with_cap(base, 4), *one_lenpen]
    )  # two validations at MiniLM's own sizes: its weights are loaded
    small = (
        "--encoder-layers 1 --encoder-embed-dim 32 --encoder-ffn-embed-dim 64 "
        "--encoder-attention-heads 2"
    )
    driver.main(
        [*with_cap(args(tiny, "unilm-random", kept=kept), 6), f"--sizes={small}", *one_lenpen]
    )  # three validations
    for row in ("unilm-minilm", "unilm-random"):
        r = json.loads((kept / f"{row}-s1.json").read_text())
        assert r["test_sentences"] == 6 and len(r["curve"]) >= (2 if row == "unilm-minilm" else 3)
        assert ("--init-from" in r["commands"]["fairseq-train"]) == (row == "unilm-minilm")
        assert (
            "unilm_seq2seq" in r["commands"]["fairseq-generate"]
            and r["recipe"] == driver.RECIPE[row]
        )
        with gzip.open(kept / f"{row}-s1.test.txt.gz", "rt") as f:
            text = f.read()
        assert (
            not re.search(r"##[a-z]", text) and "[UNK]" not in text
        )  # WordPiece joined back into words


def test_the_two_span_pretrainings_run_side_by_side_with_two_jobs(tiny, monkeypatch):
    """With --jobs 2, n = 1 and n = 2 pre-train at the same time (each waits here for the other
    to start), before any fine-tuning that starts from them."""
    import threading

    started, order = threading.Barrier(2, timeout=20), []

    def worker(self, kind, name, log, lr=None):
        if kind == "pretrain":
            # breaks (and fails the test) if the pre-trainings ran one after the other
            started.wait()
        order.append(kind)

    monkeypatch.setattr(driver.Driver, "prepare", lambda self, rows: None)
    monkeypatch.setattr(driver.Driver, "worker", worker)
    monkeypatch.setattr(
        driver.Driver,
        "kept_run",
        lambda self, name: {"test": {"rouge1": 0.0}, "chosen_update": 2, "chosen_lenpen": 1.0},
    )
    argv = args(tiny, "p1-pt", "p2-pt", kept=tiny["work"] / "kept-none")
    argv[argv.index("--in-process")] = "--jobs=2"
    driver.main(argv)
    assert order == ["pretrain", "pretrain", "finetune", "finetune"]


def test_a_pretraining_spread_over_two_calls_counts_the_seconds_of_both(
    tiny, monkeypatch, tmp_path
):
    """A pre-training killed after its first checkpoint (update 2 of 4) is credited, in the next
    call's record, with the seconds from its start to that checkpoint, as a fine-tuning run is."""
    train = driver.fairseq_train
    save = tmp_path / "work" / "pretrain-p2"

    class FineTuning(Exception):
        pass

    def killed_after_update_2(argv):
        train([*argv, "--max-update", "2"])
        raise KeyboardInterrupt("killed")

    def finetune(self, row, seed, probe_lr=None):
        raise FineTuning(row)

    monkeypatch.setattr(driver.Driver, "finetune", finetune)
    monkeypatch.setattr(driver, "fairseq_train", killed_after_update_2)
    argv = own_work(args(tiny, "p2-pt", kept=tmp_path / "kept"), tiny, tmp_path)
    with pytest.raises(KeyboardInterrupt):
        driver.main(argv)
    assert driver.checkpoint_updates(save / "checkpoint_last.pt") == 2
    state_file = save / "state.json"
    machine = driver.Driver.hardware(
        SimpleNamespace(a=SimpleNamespace(threads=1))
    )  # the tests run one thread
    assert json.loads(state_file.read_text()) == {
        "seconds": 0.0,
        "sessions": 1,
        "machines": [machine],
    }
    last = (save / "checkpoint_last.pt").stat().st_mtime
    os.utime(state_file, (last - 600, last - 600))  # as if the first call had trained for 600 s
    monkeypatch.setattr(driver, "fairseq_train", train)
    with pytest.raises(FineTuning):
        driver.main(argv)
    record = json.loads((tmp_path / "kept" / "pretrain-p2.json").read_text())
    assert (
        record["updates"] == 4 and record["sessions"] == 2 and record["hardware"] == machine
    )  # one machine, named once
    assert 600 <= record["wall_seconds"] < 600 + 300
    assert json.loads(state_file.read_text())["seconds"] == record["wall_seconds"]


def test_a_run_stopped_at_the_cap_trains_on_when_the_cap_is_raised(tiny, monkeypatch, tmp_path):
    """A run capped at 4 updates keeps its work folder; asked again with --max-updates 8 it trains
    on from update 4 (not from 0), chooses the length penalty and decodes test again; a run asked
    with a lower cap, or with another setting, is still refused."""
    trained, decoded = [], []
    train, generate = driver.fairseq_train, driver.fairseq_generate
    monkeypatch.setattr(
        driver, "fairseq_train", lambda argv: trained.append(argv[-1]) or train(argv)
    )
    monkeypatch.setattr(
        driver,
        "fairseq_generate",
        lambda argv, out: (
            decoded.append(argv[argv.index("--gen-subset") + 1]) or generate(argv, out)
        ),
    )
    kept = tmp_path / "kept"
    argv = own_work(args(tiny, "p1", kept=kept, patience=3), tiny, tmp_path)
    driver.main(with_cap(argv, 4))
    first = json.loads((kept / "p1-s1.json").read_text())
    assert first["stopped"] == "max-updates (not converged)" and [
        p["update"] for p in first["curve"]
    ] == [2, 4]
    work = tmp_path / "work" / "runs" / "p1-s1"
    assert (work / "checkpoints" / "checkpoint_last.pt").is_file() and (work / "best.pt").is_file()
    assert trained == [2, 4] and decoded.count("test") == 1
    driver.main(with_cap(argv, 4))  # the same cap: kept, nothing trained
    assert trained == [2, 4]
    driver.main(with_cap(argv, 8))
    record = json.loads((kept / "p1-s1.json").read_text())
    assert trained[2] == 6 and [p["update"] for p in record["curve"]][:3] == [2, 4, 6]
    assert (
        record["settings"]["max_updates"] == 8
        and record["extended_from_caps"] == [4]
        and record["sessions"] == 2
    )
    assert decoded.count("test") == 2 and set(record["lenpen_grid"]) == {"1.0", "1.5"}
    assert record["wall_seconds"] >= first["wall_seconds"]
    assert work.exists() == (
        record["stopped"] != "patience"
    )  # a run that converged leaves no work folder
    with pytest.raises(SystemExit, match="other settings"):
        driver.main(with_cap(argv, 6))
    with pytest.raises(SystemExit, match="other settings"):
        driver.main([*with_cap(argv, 10), "--beam", "2"])
    # a refused run stops the call before any run starts, not once the runs before it have trained
    before = list(trained)
    with pytest.raises(SystemExit, match="p1-s1.json was made with other settings"):
        driver.main([*with_cap(argv, 10), "--beam", "2", "--seeds", "2", "1"])
    assert trained == before and not (tmp_path / "work" / "runs" / "p1-s2").exists()
    started = tmp_path / "work" / "runs" / "p1-s3"  # a work folder begun at another learning rate
    driver.write_json(
        started / "state.json",
        {"settings": {**record["settings"], "max_updates": 10, "lr": "1e-5"}, "curve": []},
    )
    with pytest.raises(SystemExit, match="p1-s3 was started with other settings"):
        driver.main([*with_cap(argv, 10), "--seeds", "2", "3"])
    assert trained == before and not (tmp_path / "work" / "runs" / "p1-s2").exists()


def test_a_capped_run_whose_work_folder_is_gone_is_trained_again_from_update_0(
    tiny, monkeypatch, tmp_path
):
    """A run capped at 4 updates whose work folder was not kept (another machine, a lost disk),
    asked again with --max-updates 6, is trained from update 0; with the same seed and data its
    validations up to update 4 repeat the kept ones exactly, and its record says so."""
    trained = []
    train = driver.fairseq_train
    monkeypatch.setattr(
        driver, "fairseq_train", lambda argv: trained.append(argv[-1]) or train(argv)
    )
    kept = tmp_path / "kept"
    argv = own_work(args(tiny, "p1", kept=kept, patience=3), tiny, tmp_path)
    driver.main(with_cap(argv, 4))
    first = json.loads((kept / "p1-s1.json").read_text())
    shutil.rmtree(tmp_path / "work" / "runs" / "p1-s1")
    driver.main(with_cap(argv, 6))
    record = json.loads((kept / "p1-s1.json").read_text())
    assert trained == [2, 4, 2, 4, 6] and [p["update"] for p in record["curve"]] == [2, 4, 6]
    assert record["retrained_past_cap"] == 4 and record["repeats_kept_curve"] is True
    assert "extended_from_caps" not in record and record["sessions"] == 1
    assert driver.repeats_curve(record["curve"], first["curve"])
    assert not driver.repeats_curve(
        record["curve"], [{**first["curve"][0], "rouge1": first["curve"][0]["rouge1"] + 0.01}]
    )
    assert driver.repeats_curve(
        record["curve"], [{**first["curve"][0], "train_seconds": 1e6}]
    )  # seconds may differ
    assert not driver.repeats_curve(
        record["curve"][:1], first["curve"]
    )  # stopped before the kept run's last validation


def test_capped_pretrained_run_pretrains_again_only_if_neither_it_nor_its_pretraining_kept_one(
    tiny, monkeypatch, tmp_path
):
    """Raising the cap of a pre-trained row's capped run: with the run's work folder it trains on
    from its own checkpoint, whether or not the pre-training's folder survived; without either it
    pre-trains again (as recorded) before training the run from update 0. The record of the
    pre-training it replaces is set aside, and each record names the pre-training it started from
    by its checkpoint's SHA-256."""
    trained = []
    train = driver.fairseq_train
    monkeypatch.setattr(
        driver, "fairseq_train", lambda argv: trained.append(argv[-1]) or train(argv)
    )
    kept = tmp_path / "kept"
    argv = own_work(args(tiny, "p1-pt", kept=kept, patience=3), tiny, tmp_path)
    work = tmp_path / "work"
    driver.main(with_cap(argv, 4))
    assert trained == [work / "pretrain-p1", 2, 4]
    first = json.loads((kept / "pretrain-p1.json").read_text())["checkpoint_sha256"]
    assert first == driver.sha256(work / "pretrain-p1" / "checkpoint_last.pt")
    assert json.loads((kept / "p1-pt-s1.json").read_text())["pretraining_sha256"] == first
    shutil.rmtree(work / "pretrain-p1")
    driver.main(with_cap(argv, 6))  # the run's own checkpoint at update 4: no pre-training
    assert trained[3:] == [6]
    assert json.loads((kept / "p1-pt-s1.json").read_text())["pretraining_sha256"] == first
    shutil.rmtree(work / "runs" / "p1-pt-s1")
    driver.main(with_cap(argv, 8))  # neither kept: pre-trained again, then the run from update 0
    assert trained[4:] == [work / "pretrain-p1", 2, 4, 6, 8]
    again = json.loads((kept / "pretrain-p1.json").read_text())
    assert again["updates"] == 4 and again["checkpoint_sha256"] == driver.sha256(
        work / "pretrain-p1" / "checkpoint_last.pt"
    )
    assert (
        again["checkpoint_sha256"] != first
    )  # fairseq's checkpoint holds its meters' clocks: never the same bytes
    replaced = json.loads(
        (kept / "superseded" / "pretraining" / f"pretrain-p1-{first[:12]}.json").read_text()
    )
    assert replaced["checkpoint_sha256"] == first
    run = json.loads((kept / "p1-pt-s1.json").read_text())
    assert (
        run["retrained_past_cap"] == 6 and run["pretraining_sha256"] == again["checkpoint_sha256"]
    )
    results = collect.collect(kept, json.loads(protocol.RESULTS.read_text()), None)
    assert (
        results["models"]["p1-pt"]["earlier_pretraining"] == {}
    )  # its one run started from the kept pre-training
    assert (
        results["replaced_pretraining"][f"pretrain-p1-{first[:12]}"]["checkpoint_sha256"] == first
    )


def test_the_pretraining_loss_curve_counts_an_update_logged_by_two_calls_once():
    """A worker log of a call killed after update 150 and one resumed from its checkpoint at 100."""

    def line(update, loss):
        return (
            f"INFO:train_inner:epoch 001:  {update} / 900 loss={loss}, nll_loss=1.0, ppl=2, "
            f"wps=1, ups=1, wpb=1, bsz=1, num_updates={update}, lr=0.001, gnorm=1.0, clip=0, "
            "train_wall=1, wall=1"
        )

    log = "\n".join(
        [
            line(50, 9.0),
            line(100, 8.0),
            line(150, 7.5),
            "INFO:fairseq_cli.train:Start iterating",
            line(150, 7.25),
            line(200, 7.0),
        ]
    )
    assert driver.loss_curve(log) == [
        {"update": 50, "loss": 9.0},
        {"update": 100, "loss": 8.0},
        {"update": 150, "loss": 7.25},
        {"update": 200, "loss": 7.0},
    ]


def test_a_pretraining_under_way_beside_the_record_of_a_lost_one_is_continued_not_taken_for_it(
    tiny, monkeypatch, tmp_path
):
    """The record of a finished pre-training is kept, its folder was lost, and a new pre-training
    stopped at update 2 of 4 in that folder: a run that starts from the pre-training finishes it
    first (the record describes other weights), then starts from its last checkpoint."""
    trained = []
    train = driver.fairseq_train
    monkeypatch.setattr(
        driver, "fairseq_train", lambda argv: trained.append(argv[-1]) or train(argv)
    )
    kept, work = tmp_path / "kept", tmp_path / "work"
    argv = own_work(args(tiny, "p1-pt", kept=kept, patience=3), tiny, tmp_path)
    driver.main(with_cap(argv, 2))
    save = work / "pretrain-p1"
    for path in [save / "checkpoint_last.pt", *save.glob("checkpoint_*_4.pt")]:
        path.unlink()
    shutil.copyfile(
        next(save.glob("checkpoint_*_2.pt")), save / "checkpoint_last.pt"
    )  # the new one, under way
    shutil.rmtree(work / "runs" / "p1-pt-s1")
    driver.main(with_cap(argv, 4))
    assert (
        trained[2:] == [save, 2, 4] and driver.checkpoint_updates(save / "checkpoint_last.pt") == 4
    )
    record = json.loads((kept / "pretrain-p1.json").read_text())
    assert record["checkpoint_sha256"] == driver.sha256(save / "checkpoint_last.pt")
    assert (
        json.loads((kept / "p1-pt-s1.json").read_text())["pretraining_sha256"]
        == record["checkpoint_sha256"]
    )
    assert len(list((kept / "superseded" / "pretraining").glob("pretrain-p1-*.json"))) == 1


def test_line_variance_against_a_loop_over_lines_and_positions():
    """The between-line and total sums of squares agree with a brute-force loop over the real
    positions, between + within = total (the analysis-of-variance identity, within by its own loop),
    padded positions count for nothing, and lines whose states are each constant are all between."""
    import math

    import torch

    from reproduction.gigaword_10k.source_reliance import line_variance

    torch.manual_seed(0)
    states = torch.randn(6, 3, 4, dtype=torch.float64)  # T x B x C
    padding = torch.tensor(
        [
            [True, True, False, False, False, False],
            [False] * 6,
            [True, False, False, False, False, False],
        ]
    )
    real = [(t, b) for b in range(3) for t in range(6) if not padding[b, t]]
    grand = sum(states[t, b] for t, b in real) / len(real)
    means = {
        b: sum(states[t, b] for t, c in real if c == b) / sum(1 for _, c in real if c == b)
        for b in range(3)
    }
    total = sum(float(((states[t, b] - grand) ** 2).sum()) for t, b in real)
    between = sum(float(((means[b] - grand) ** 2).sum()) for _, b in real)
    within = sum(float(((states[t, b] - means[b]) ** 2).sum()) for t, b in real)
    got = line_variance(states, padding)
    assert math.isclose(got[0], between, rel_tol=1e-12) and math.isclose(
        got[1], total, rel_tol=1e-12
    )
    assert math.isclose(got[0] + within, got[1], rel_tol=1e-12) and 0 < got[0] < got[1]
    assert line_variance(states.masked_fill(padding.T.unsqueeze(-1), 1e6), padding) == got
    constant = states[:1].expand(6, 3, 4)  # each line the same state at every position
    assert math.isclose(
        line_variance(constant, padding)[0], line_variance(constant, padding)[1], rel_tol=1e-12
    )


def test_source_reliance_scores_the_next_token_stream_with_its_own_and_another_lines_source(
    tiny, tmp_path, capsys
):
    """The diagnostic's loss with each line's own source is the criterion's next-token-stream loss
    (fairseq's label-smoothed NLL with epsilon 0, an independent path), a one-line batch has no
    other line to borrow a source from (rolled = own), and the JSON lists each pre-training."""
    import math

    import torch
    from fairseq import checkpoint_utils

    from fairseq_ext.criterions.ngram_language_loss import NgramLanguageLoss
    from reproduction.gigaword_10k import source_reliance

    ckpt = (
        tiny["work"] / "pretrain-p1" / "checkpoint_last.pt"
    )  # the end-to-end test's span pre-training
    (model,), _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(ckpt)], arg_overrides={"data": str(tiny["work"] / "data" / "english" / "bin")}
    )
    model.eval()
    task.load_dataset("train")
    data = task.dataset("train")
    batch = data.collater([data[i] for i in range(4)])
    criterion = NgramLanguageLoss(task, label_smoothing=0.0)
    with torch.no_grad():
        _, _, logged = criterion(model, batch)
        own, tokens = source_reliance.stream1_nats(model, batch, roll=False)
        rolled, _ = source_reliance.stream1_nats(model, batch, roll=True)
        one = data.collater([data[0]])
        alone = [source_reliance.stream1_nats(model, one, roll=r)[0] for r in (False, True)]
    assert tokens == logged["s1_count"] and math.isclose(
        own, float(logged["s1_loss"]), rel_tol=1e-5
    )
    assert rolled != own and alone[0] == alone[1]
    out = tmp_path / "reliance.json"
    for bad, says in (
        (["--batches", "0"], "--batches and --max-tokens must be >= 1"),
        (["--work", str(tmp_path)], "no data/english/bin"),
    ):
        with pytest.raises(SystemExit):
            source_reliance.main([*bad, "--output", str(out)])
        assert says in capsys.readouterr().err and not out.exists()
    source_reliance.main(
        ["--work", str(tiny["work"]), "--batches", "2", "--max-tokens", "256", "--output", str(out)]
    )
    written = json.loads(out.read_text())
    assert set(written["checkpoints"]) == {
        "pretrain-p1"
    }  # the one span pre-training in that work folder
    r = written["checkpoints"]["pretrain-p1"]
    assert r["lines"] > 0 and math.isclose(
        r["bits_the_source_saves"], r["bits_rolled_source"] - r["bits_own_source"], abs_tol=2e-3
    )
    # each interval checkpoint of the pre-training (2 and 4 updates), the last one being
    # checkpoint_last.pt
    assert [c["update"] for c in r["by_update"]] == [2, 4]
    assert all(
        r["by_update"][-1][k] == r[k] for k in ("bits_own_source", "bits_rolled_source", "lines")
    )
    # that last one is scored once: checkpoint_last.pt scored on its own agrees
    probe = source_reliance.Probe(ckpt, tiny["work"] / "data" / "english" / "bin", 2, 256)
    alone = probe.score(ckpt)
    assert r["checkpoint_sha256"] == driver.sha256(ckpt)
    same = [k for k in r if k not in ("by_update", "at_init", "checkpoint_sha256")]
    assert probe.update == 4 and {k: alone[k] for k in same} == {k: r[k] for k in same}
    # the between-line share, read from the own-source forward by a hook, is that of the encoder run
    # on its own
    with torch.no_grad():
        runs = [
            model.encoder(s["net_input"]["src_tokens"], src_lengths=s["net_input"]["src_lengths"])
            for s in probe.samples
        ]
    sums = [
        source_reliance.line_variance(e["encoder_out"][0], e["encoder_padding_mask"][0])
        for e in runs
    ]
    assert alone["encoder_between_line_share"] == round(
        sum(b for b, _ in sums) / sum(t for _, t in sums), 4
    )
    for name in (
        "checkpoint_1_2.pt",
        "checkpoint_3_10.pt",
        "checkpoint_1_2_3.pt",
        "checkpoint_a_2.pt",
        "checkpoint_best.pt",
    ):
        (tmp_path / name).touch()
    assert source_reliance.interval_checkpoints(tmp_path) == [
        (2, tmp_path / "checkpoint_1_2.pt"),
        (10, tmp_path / "checkpoint_3_10.pt"),
    ]
    kept = {"pretrain-p1": {"ngram": 1, "checkpoint_sha256": r["checkpoint_sha256"]}}
    note = page.reliance_note({"pretraining": kept, "source_reliance": written})[0]
    assert (
        f"n = 1: {r['bits_own_source']:.2f} and {r['bits_rolled_source']:.2f} (the source saves "
        f"{r['bits_the_source_saves']:.2f})." in note
    ) and f"on {r['lines']:,} lines" in note
    saves = ", ".join(f"{c['bits_the_source_saves']:.2f}" for c in r["by_update"])
    assert (
        f"interval checkpoints: n = 1: {saves} at updates 2, 4." in note
        and "Not measured yet" not in note
    )
    # the encoder's between-line share, at each interval checkpoint and at the configuration's
    # random
    # initialisation under the pre-training's seed (repeatable: scored again, the same numbers)
    shares = [c["encoder_between_line_share"] for c in r["by_update"]]
    assert r["at_init"]["seed"] == 1 and all(
        0 < x < 1 for x in [*shares, r["at_init"]["encoder_between_line_share"]]
    )
    assert (
        f"n = 1: {r['at_init']['encoder_between_line_share']:.3f} at random initialisation, then "
        f"{shares[0]:.3f}, {shares[1]:.3f} at the same updates." in note
    )
    assert (
        probe.score_at_init() == r["at_init"]
        and r["at_init"]["bits_own_source"] != r["bits_own_source"]
    )
    # a later call adds its pre-trainings to those measured before (one whose folder is gone stays)
    earlier = {
        **written,
        "checkpoints": {"pretrain-p2": {**r, "checkpoint_sha256": None}},
        "wall_seconds": 100.0,
    }
    out.write_text(json.dumps(earlier))
    source_reliance.main(
        ["--work", str(tiny["work"]), "--batches", "2", "--max-tokens", "256", "--output", str(out)]
    )
    merged = json.loads(out.read_text())
    assert merged["checkpoints"] == {**earlier["checkpoints"], "pretrain-p1": r}
    assert merged["calls"] == 2 and merged["wall_seconds"] > 100
    with pytest.raises(SystemExit):  # measured otherwise: refused before measuring
        source_reliance.main(
            [
                "--work",
                str(tiny["work"]),
                "--batches",
                "3",
                "--max-tokens",
                "256",
                "--output",
                str(out),
            ]
        )
    assert (
        "was measured by `python -m reproduction.gigaword_10k.source_reliance --batches 2"
        in capsys.readouterr().err
    )
    # a pre-training kept now that is not the one measured (pre-trained again) is said to be
    # unmeasured
    kept["pretrain-p2"] = {"ngram": 2, "checkpoint_sha256": "0" * 64}
    note = page.reliance_note({"pretraining": kept, "source_reliance": merged})[0]
    assert (
        "n = 1: " in note
        and "n = 2: " not in note
        and "Not measured yet for the pre-training above of n = 2." in note
    )
    assert " s in 2 calls); " in note
    # nor is one whose record has no hash, though the measurement has none either (no hash is no
    # match)
    kept["pretrain-p2"] = {"ngram": 2}
    assert (
        "Not measured yet for the pre-training above of n = 2."
        in page.reliance_note({"pretraining": kept, "source_reliance": merged})[0]
    )
    kept["pretrain-p1"]["checkpoint_sha256"] = "1" * 64
    assert page.reliance_note({"pretraining": kept, "source_reliance": merged})[0].startswith(
        "Whether the pre-trained decoder reads its encoder is not measured for the "
        "pre-trainings above (n = 1, n = 2; "
    )

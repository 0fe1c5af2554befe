"""reproduction/gigaword_10k/lead_baseline.py on a made-up Gigaword folder: lead-N scored by the
product's scorer, N chosen on valid4k, the test set scored for lead-8 and that N only."""

import pytest

from fairseq_ext.analysis.rouge import rouge_f1
from reproduction.gigaword_10k.collect import earlier_pretraining, logged_loss_against
from reproduction.gigaword_10k.lead_baseline import PUBLISHED, measure, split_statistics
from reproduction.gigaword_10k.page import lr_grid_notes, markdown, pretraining_note
from reproduction.gigaword_10k.protocol import MODEL_ROWS, USER_SCRIPTS


def write(folder, prefix, articles, titles):
    (folder / f"{prefix}.article.txt").write_text("\n".join(articles) + "\n")
    (folder / f"{prefix}.title.txt").write_text("\n".join(titles) + "\n")


def test_lead_n_is_chosen_on_valid4k_and_test_scored_for_8_and_that_n(tmp_path):
    article = "w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12"
    write(tmp_path, "valid1k", [article], ["w1 w2"])
    write(tmp_path, "valid4k", [article], ["w1 w2 w3"])  # lead-3 matches exactly
    write(tmp_path, "test1951", [article, "a b c d e f g h i"], ["w1 w2 w3", "UNK b"])
    out = measure(tmp_path, 10)
    assert out["chosen_n"] == 3 and out["valid"]["valid4k"]["3"]["rouge1"] == 100.0
    assert set(out["test"]) == {"lead-8", "lead-3"}
    want = rouge_f1(["w1 w2 w3", "a b c"], ["w1 w2 w3", "UNK b"])
    assert out["test"]["lead-3"]["rouge1"] == pytest.approx(round(want["rouge1"], 2))
    text = markdown(
        {
            "lead": out,
            "published": PUBLISHED,
            "command": "cmd",
            "wall_seconds": 1,
            "hardware": "cpu",
        }
    )
    assert "| lead-3 | " in text and "| Transformer, no pre-training (published) | 10.97 |" in text
    assert all(f"| {row} | not run yet |" in text for row in MODEL_ROWS)
    assert "titles holding one: valid1k 0.0%, valid4k 0.0%, test1951 50.0%;" in text
    v, t = out["valid"]["valid4k"]["8"]["rouge1"], out["test"]["lead-8"]["rouge1"]
    lower = "Every row scores lower on test than on valid"
    assert (
        f"{lower if t < v else 'ROUGE-1 on valid and on test'}: "
        f"lead-8 {v:.2f} on valid4k, {t:.2f} on test." in text
    )


def test_split_statistics_count_oov_title_words_and_title_words_found_in_the_article():
    # pair 1: 4 title words, 'UNK' found as the article's '<unk>', 'Rises' as 'rises': 3 of 4 found;
    # pair 2: 2 title words, one '<unk>' not in the article: 1 of 2 found
    stats = split_statistics(
        ["stocks <unk> rises today", "a b c"], ["UNK stocks Rises sharply", "a <unk>"]
    )
    assert stats == {
        "title_words_oov": round(100 * 2 / 6, 2),
        "titles_with_oov": 100.0,
        "title_words_in_article": round(100 * (3 / 4 + 1 / 2) / 2, 1),
    }


def test_the_pretraining_note_gives_each_n_its_loss_time_calls_and_machine():
    corpus = {"lines": 79886, "words": 1651645, "sources": [{"file": "a"}, {"file": "b"}]}
    kept = {
        f"pretrain-p{n}": {
            "ngram": n,
            "updates": 4000,
            "corpus": corpus,
            "wall_seconds": 3600 * n,
            "sessions": n,
            "hardware": {
                1: "AMD EPYC, 2 cores, torch threads 1",
                2: "Intel(R) Xeon(R) Processor, 2 cores, torch threads 1",
            }[n],
            "loss_first": {"update": 50, "loss": 10.5},
            "loss_last": {"update": 4000, "loss": 4.25 + n},
        }
        for n in (1, 2)
    }
    assert pretraining_note({"pretraining": kept})[0] == (
        "Span pre-training of the ProphetNet rows after pre-training (`prophetnet_denoising` "
        "with the row's n, one seed, kept with its command in `runs/pretrain-pN.json`): n = 1: "
        "4000 updates, training loss 10.50 at update 50 and 5.25 at update 4000, 1.0 h in 1 "
        "call on AMD EPYC; n = 2: 4000 updates, training loss 10.50 at update 50 and 6.25 at "
        "update 4000, 2.0 h in 2 calls on Intel(R) Xeon(R) Processor. The training loss is the "
        "criterion's (bits a target token, the streams' losses weighted and summed), so n = 2's "
        "is not comparable with n = 1's. Its corpus: 79,886 lines, 1,651,645 words from 2 files "
        "(each listed with its SHA-256 in that record); no valid or test pair of Gigaword."
    )
    assert pretraining_note({"pretraining": {}}) == []


def test_runs_fine_tuned_from_a_replaced_pretraining_are_named_with_it():
    """Seeds 2 and 3 kept without a pre-training hash came from the unhashed record a later
    pre-training replaced; seed 1 started from the current one; a hash no record holds is said
    so."""
    corpus = {"lines": 10, "words": 100, "sources": [{"file": "a"}]}
    current = {
        "ngram": 2,
        "updates": 4000,
        "corpus": corpus,
        "wall_seconds": 3600,
        "sessions": 1,
        "checkpoint_sha256": "ab" * 32,
        "hardware": "Intel(R) Xeon(R) Processor, 2 cores, torch threads 1",
    }
    replaced = {
        "pretrain-p2-unhashed": {
            **current,
            "checkpoint_sha256": None,
            "sessions": 2,
            "hardware": "AMD EPYC, 2 cores, torch threads 1",
            "record": (
                "reproduction/gigaword_10k/runs/superseded/pretraining/pretrain-p2-unhashed.json"
            ),
        },
        "pretrain-p1-unhashed": {**current, "ngram": 1, "checkpoint_sha256": None, "record": "p1"},
    }
    seeds = {
        1: {"pretraining_sha256": "ab" * 32},
        2: {},
        3: {"pretraining_sha256": None},
        4: {"pretraining_sha256": "cd" * 32},
    }
    earlier = earlier_pretraining(seeds, 2, current, replaced)
    assert earlier == {"2": "pretrain-p2-unhashed", "3": "pretrain-p2-unhashed", "4": None}
    results = {
        "pretraining": {"pretrain-p2": current},
        "replaced_pretraining": replaced,
        "models": {
            "p2-pt": {
                "label": "ProphetNet n = 2, span pre-training",
                "earlier_pretraining": earlier,
            }
        },
    }
    assert pretraining_note(results)[2] == (
        "Fine-tuned from an earlier span pre-training, not the one above (the driver pre-trains "
        "again when a run to be trained has no checkpoint and the pre-training's folder is "
        "gone): ProphetNet n = 2, span pre-training seeds 2, 3, from n = 2: 4000 updates, 1.0 h "
        "in 2 calls on AMD EPYC "
        "(`reproduction/gigaword_10k/runs/superseded/pretraining/pretrain-p2-unhashed.json`); "
        "ProphetNet n = 2, span pre-training seed 4, from a pre-training whose record is not kept."
    )
    replaced["pretrain-p2-unhashed"]["logged_loss"] = {"same_updates": 80}
    assert (
        "-unhashed.json`; its training loss at each of its 80 logged updates is that of the "
        "pre-training above, so the same run as far as its log shows; its checkpoint is not "
        "kept to compare); ProphetNet" in pretraining_note(results)[2]
    )
    replaced["pretrain-p2-unhashed"]["logged_loss"] = {"departs_at": 750}
    assert (
        "-unhashed.json`; its training loss departs from that of the pre-training above at "
        "update 750); "
        "ProphetNet" in pretraining_note(results)[2]
    )
    results["models"]["p2-pt"]["earlier_pretraining"] = {}
    assert (
        len(pretraining_note(results)) == 2
    )  # every run from the pre-training described: no such line


def test_a_replaced_pretraining_shares_its_logged_loss_only_when_every_logged_update_agrees():
    curve = [
        {"update": 50, "loss": 11.245},
        {"update": 100, "loss": 9.5},
        {"update": 150, "loss": 9.0},
    ]
    assert logged_loss_against(curve, []) == {}  # no pre-training of its n kept now
    later = [curve[0], {"update": 100, "loss": 9.501}, {"update": 150, "loss": 8.9}]
    for now, compared in (
        (curve, {"same_updates": 3}),
        (curve[:1], {}),
        (later, {"departs_at": 100}),
        (curve + [{"update": 200, "loss": 8.5}], {}),
        ([{"update": 60, "loss": 1.0}], {}),
    ):
        assert logged_loss_against(curve, now) == compared


def test_runs_set_aside_by_the_learning_rate_grid_are_named_out_of_the_table():
    probe = {
        "valid_rouge1": 3.13,
        "chosen_update": 3500,
        "distinct": 23,
        "seeds": [0],
        "stopped": ["max-updates (not converged)"],
        "patience": 3,
        "caps": [3500],
    }
    results = {
        "lr_grid": {
            "p1-pt": {"label": "ProphetNet n = 1, span pre-training", "rates": {"2e-4": probe}}
        },
        "models": {},
    }
    assert len(lr_grid_notes(results)) == 2  # no run set aside: the probes alone
    results["superseded"] = [
        {
            "record": "runs/superseded/p1-pt-s1.json",
            "label": "ProphetNet n = 1, span pre-training",
            "seed": 1,
            "lr": "7e-4",
            "valid_rouge1": 6.61,
            "test_rouge1": 5.75,
            "test_distinct": 42,
        }
    ]
    notes = lr_grid_notes(results)
    assert (
        "lr 2e-4: 3.13 at update 3500 (23 distinct headlines; stopped at the cap of 3500 "
        "updates, not converged)" in notes[1]
    )
    assert notes[3].endswith(
        "ProphetNet n = 1, span pre-training, seed 1, lr 7e-4: valid1k ROUGE-1 6.61, test 5.75 "
        "(42 distinct headlines; `runs/superseded/p1-pt-s1.json`)."
    )


def test_the_figure_draws_each_run_solid_each_probe_dashed_and_lead8_dotted(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from reproduction.gigaword_10k import collect

    axes = []
    subplots = plt.subplots
    monkeypatch.setattr(
        plt, "subplots", lambda *a, **k: (lambda fa: axes.append(fa[1]) or fa)(subplots(*a, **k))
    )
    models = {
        "p2-pt": {
            "label": "n2",
            "curves": {"1": [[500, 10.0], [1000, 15.0]], "2": [[500, 9.0], [1000, 14.0]]},
        }
    }
    grid = {
        "p2-pt": {
            "label": "n2",
            "rates": {
                "2e-4": {"curve": [[500, 6.0], [1000, 7.5]]},
                "7e-4": {"curve": [[500, 9.5]]},
            },
        }
    }
    assert (
        collect.plot(models, grid, 28.95, tmp_path / "f.png")
        and (tmp_path / "f.png").stat().st_size > 0
    )
    lines = {(tuple(x.get_xdata()), tuple(x.get_ydata())): x.get_linestyle() for x in axes[0].lines}
    assert lines[((500, 1000), (10.0, 15.0))] == lines[((500, 1000), (9.0, 14.0))] == "-"
    assert lines[((500, 1000), (6.0, 7.5))] == lines[((500,), (9.5,))] == "--"
    assert lines[((0, 1), (28.95, 28.95))] == ":" and len(lines) == 5
    assert [t.get_text() for t in axes[0].texts] == ["lr 2e-4", "lr 7e-4"]
    collect.plot(
        models, {}, None, tmp_path / "g.png"
    )  # valid not the whole valid1k: no lead-8 line
    assert len(axes[1].lines) == 2


def test_a_verdict_names_the_rows_and_seeds_that_stopped_at_a_cap_and_p_values_under_0_001():
    from reproduction.gigaword_10k.page import capped, t_test

    assert (t_test(0.0003), t_test(0.0), t_test(0.001), t_test(0.0456)) == (
        "p < 0.001",
        "p < 0.001",
        "p = 0.001",
        "p = 0.046",
    )
    claim = {
        "row": "p2-pt",
        "baseline": "p1-pt",
        "seeds": [3, 3],
        "at_a_cap": {"p2-pt": [1, 2, 3], "p1-pt": [1]},
    }
    assert capped(claim) == "; p2-pt and p1-pt (seed 1) stopped at an update cap, not converged"
    claim["at_a_cap"] = {"p1-pt": [1, 3]}
    assert capped(claim) == "; p1-pt (seeds 1, 3) stopped at an update cap, not converged"
    assert (
        capped({**claim, "at_a_cap": {}}) == ""
        and capped({"row": "a", "baseline": "b", "seeds": [1, 1]}) == ""
    )


def test_the_user_scripts_length_penalty_is_the_best_mean_over_converged_seeds_only():
    from reproduction.gigaword_10k.collect import lenpen_of_converged
    from reproduction.gigaword_10k.page import lenpen_notes

    def run(seed, stopped, scores):
        return {
            "seed": seed,
            "stopped": stopped,
            "lenpen_grid": {lp: {"rouge1": r} for lp, r in zip(("0.8", "1.2"), scores)},
        }

    records = [
        run(1, "patience", [38.5, 38.4]),
        run(2, "patience", [37.5, 37.8]),
        run(3, "max-updates (not converged)", [40.0, 10.0]),
    ]  # a capped seed has no say
    chosen = lenpen_of_converged(records)
    assert chosen == {"seeds": [1, 2], "mean_rouge1": {"0.8": 38.0, "1.2": 38.1}, "best": "1.2"}
    assert lenpen_of_converged(records[2:]) is None
    models = {
        "unilm-minilm": {"label": "Row", "lenpen_of_converged": chosen},
        "p1-pt": {"label": "Q", "lenpen_of_converged": chosen},
    }
    note = lenpen_notes(models)
    assert note[1].endswith(
        "Row, `examples/pretrained/minilm_gigaword.sh` (from seeds 1, 2): 0.8 38.00, 1.2 38.10; "
        "best 1.2."
    )
    assert "Q" not in note[1]  # a row no user script follows
    assert lenpen_notes({"unilm-minilm": {"label": "Row", "lenpen_of_converged": None}}) == []


def test_the_batches_note_names_the_runs_and_updates_trained_before_batches_were_cut_per_epoch():
    from reproduction.gigaword_10k.collect import batches_cut_per_start
    from reproduction.gigaword_10k.page import batches_note

    def run(
        seed, start
    ):  # start: the driver's batches_per_epoch_from (None: a record written before it)
        return {
            "seed": seed,
            "curve": [{"update": 500}, {"update": 1000}, {"update": 1500}],
            "batches_per_epoch_from": start,
        }

    old, mixed, new = run(1, None), run(2, 1300), run(3, 0)
    assert batches_cut_per_start([old, mixed, new]) == {
        "1": {"up_to": 1500, "all": True},
        "2": {"up_to": 1300, "all": False},
    }
    assert batches_cut_per_start([{"seed": 4, "curve": [{"update": 500}]}]) == {
        "4": {"up_to": 500, "all": True}
    }
    models = {
        "a": {
            "label": "A",
            "seeds": [1, 2, 3],
            "batches_cut_per_start": batches_cut_per_start([old, mixed, new]),
        },
        "b": {"label": "B", "seeds": [1], "batches_cut_per_start": batches_cut_per_start([old])},
    }
    assert batches_note({"models": models})[1].endswith(
        "trained that way: A seed 1; A seed 2 up to update 1300; B seed 1."
    )
    assert batches_note({"models": {"b": models["b"]}})[1].endswith(
        "trained that way: every run above."
    )
    c = {"c": {"label": "C", "seeds": [3], "batches_cut_per_start": batches_cut_per_start([new])}}
    assert batches_note({"models": c}) == []

    # the learning-rate probes (seed 0) and the runs set aside are named too
    def probe(start):
        return {"batches_cut_per_start": batches_cut_per_start([run(0, start)])}

    grid = {"c": {"label": "C", "rates": {"1e-4": probe(None), "2e-4": probe(None)}}}
    assert batches_note({"models": c, "lr_grid": grid})[1].endswith(
        "trained that way: every learning-rate probe."
    )
    grid["c"]["rates"]["2e-4"] = probe(1000)
    grid["c"]["rates"]["3e-4"] = probe(0)
    set_aside = [
        {"label": "C", "lr": "5e-4", "batches_cut_per_start": batches_cut_per_start([old])}
    ]
    assert batches_note({"models": {"b": models["b"]}, "lr_grid": grid, "superseded": set_aside})[
        1
    ].endswith(
        "trained that way: every run above; the learning-rate probes C at lr 1e-4, C at lr 2e-4 "
        "up to update 1000; the set-aside C, lr 5e-4, seed 1."
    )


@pytest.mark.parametrize("row_name", sorted(USER_SCRIPTS))
def test_a_user_script_defaults_to_the_cap_and_length_penalty_of_its_rows_converged_seeds(row_name):
    import json
    import re

    from reproduction.gigaword_10k.protocol import RESULTS, ROOT

    row = json.loads(RESULTS.read_text(encoding="utf-8"))["models"][row_name]
    chosen = row["lenpen_of_converged"]
    script = (ROOT / USER_SCRIPTS[row_name]).read_text(encoding="utf-8")
    assigned: dict = {}
    for name, value in re.findall(r"(?<![A-Z_])([A-Z_]+)=(\S+)", script):
        assigned.setdefault(
            name, value
        )  # the first assignment: the default, not the option parsing's
    # the ProphetNet script names the cap and the validation interval after its two stages
    spelled = {"UPDATES": "FINETUNE", "EVERY": "VALIDATE_EVERY"} if "FINETUNE" in assigned else {}
    defaults = {
        name: assigned.get(spelled.get(name, name))
        for name in ("UPDATES", "LENPEN", "PATIENCE", "EVERY")
    }
    caps = {cap for seed, cap in zip(row["seeds"], row["caps"]) if seed in chosen["seeds"]}
    assert (
        defaults
        == {
            "UPDATES": str(caps.pop()),
            "LENPEN": chosen["best"],
            "PATIENCE": str(row["patience"]),
            "EVERY": str(row["chunk"]),
        }
        and not caps
    )

"""The Gigaword 10k table and its summary lines as the page shows them, rendered from its results
file (``protocol.RESULTS``): the published rows, lead-N, each trained row with its seeds and how its
runs stopped, the notes under the table and the verdicts on the papers' claims. Written by
``lead_baseline.py`` (the lead-N part) and ``collect.py`` (the trained rows)."""

from __future__ import annotations

from reproduction.gigaword_10k.protocol import (
    CHOOSE_ON,
    EARLY_STOPPED,
    ESTABLISHED,
    MODEL_ROWS,
    OPPOSITE,
    SEEDS_FOR_A_VERDICT,
    TEST,
    USER_SCRIPTS,
    VALID,
)


def markdown(results: dict) -> str:
    lead_part = results["lead"]
    n = lead_part["chosen_n"]
    rows = [
        "| row | ROUGE-1 | ROUGE-2 | ROUGE-L | valid4k ROUGE-1 | source |",
        "|---|---|---|---|---|---|",
    ]
    for p in results["published"]:
        rows.append(
            f"| {p['row']} (published) | {p['rouge1']:.2f} | {p['rouge2']:.2f} | "
            f"{p['rougeL']:.2f} | | {p['source']} |"
        )
    for name, scores in lead_part["test"].items():
        valid = lead_part["valid"][CHOOSE_ON][name.split("-")[1]]["rouge1"]
        how = (
            "N chosen on valid4k"
            if name == f"lead-{n}" and n != 8
            else "the article's first 8 words"
        )
        rows.append(
            f"| {name} | {scores['rouge1']:.2f} | {scores['rouge2']:.2f} | "
            f"{scores['rougeL']:.2f} | {valid:.2f} | this repository ({how}) |"
        )
    models = {m["label"]: m for m in results.get("models", {}).values()}
    for name in MODEL_ROWS:
        rows.append(
            model_row(name, models[name]) if name in models else f"| {name} | not run yet | | | | |"
        )
    curve = ", ".join(f"{k}: {v['rouge1']:.1f}" for k, v in lead_part["valid"][CHOOSE_ON].items())
    return "\n".join(
        [
            *rows,
            "",
            f"Test: the {lead_part['sentences'][TEST]} pairs of {TEST}, scored once per row. "
            "Published rows: ROUGE-1.5.5 (Perl); ours: rouge-score (stemmed, mean sentence F1), "
            f"whose values differ slightly. Lead-N on valid4k, ROUGE-1 by N: {curve}; the best "
            f"is N = {n}. Written by `{results['command']}` ({results['wall_seconds']} s, "
            f"{results['hardware']}).",
            "",
            splits_note(results),
            "",
            *model_notes(results),
            *pretraining_note(results),
        ]
    )


def pretraining_note(results: dict) -> list[str]:
    """What the span pre-training of the pre-trained ProphetNet rows did
    (``runs/pretrain-pN.json``)."""
    kept = results.get("pretraining") or {}
    if not kept:
        return []
    each = "; ".join(pretraining_text(r) for r in kept.values())
    corpus = next(iter(kept.values()))["corpus"]
    return [
        "Span pre-training of the ProphetNet rows after pre-training (`prophetnet_denoising` "
        f"with the row's n, one seed, kept with its command in `runs/pretrain-pN.json`): {each}. "
        "The training loss is the criterion's (bits a target token, the streams' losses "
        "weighted and summed), so n = 2's is not comparable with n = 1's. Its corpus: "
        f"{corpus['lines']:,} lines, {corpus['words']:,} words from {len(corpus['sources'])} "
        "files (each listed with its SHA-256 in that record); no valid or test pair of Gigaword.",
        "",
        *earlier_pretraining_note(results),
        *reliance_note(results),
    ]


def pretraining_text(r: dict) -> str:
    """'n = 2: 4000 updates, training loss ... at update 50 and ... at update 4000, 1.2 h in 1 call
    on AMD EPYC' (no loss where none was logged: a run shorter than fairseq's --log-interval, or one
    in-process; the machine as the record's hardware names it, before its cores and threads)."""
    loss = (
        (
            f"training loss {r['loss_first']['loss']:.2f} at update {r['loss_first']['update']} "
            f"and {r['loss_last']['loss']:.2f} at update {r['loss_last']['update']}, "
        )
        if "loss_first" in r
        else ""
    )
    return (
        f"n = {r['ngram']}: {r['updates']} updates, {loss}{r['wall_seconds'] / 3600:.1f} h in "
        f"{r['sessions']} call{'s' if r['sessions'] > 1 else ''} on {r['hardware'].split(',')[0]}"
    )


def loss_against_kept(replaced: dict) -> str:
    """How a replaced pre-training's logged loss compares with the one kept now
    (``collect.logged_loss_against``)."""
    compared = replaced.get("logged_loss", {})
    if "same_updates" in compared:
        return (
            f"; its training loss at each of its {compared['same_updates']} logged updates is "
            "that of the pre-training above, so the same run as far as its log shows; its "
            "checkpoint is not kept to compare"
        )
    if "departs_at" in compared:
        return (
            "; its training loss departs from that of the pre-training above at update "
            f"{compared['departs_at']}"
        )
    return ""


def earlier_pretraining_note(results: dict) -> list[str]:
    """The runs of a pre-trained row fine-tuned from a pre-training that a later one replaced."""
    replaced = results.get("replaced_pretraining") or {}
    each = []
    for m in results.get("models", {}).values():
        by_source: dict = {}
        for seed, name in m.get("earlier_pretraining", {}).items():
            by_source.setdefault(name, []).append(seed)
        each += [
            f"{m['label']} {seed_names(seeds)}, from "
            + (
                f"{pretraining_text(replaced[name])} "
                f"(`{replaced[name]['record']}`{loss_against_kept(replaced[name])})"
                if name in replaced
                else "a pre-training whose record is not kept"
            )
            for name, seeds in by_source.items()
        ]
    if not each:
        return []
    return [
        "Fine-tuned from an earlier span pre-training, not the one above (the driver pre-trains "
        "again when a run to be trained has no checkpoint and the pre-training's folder is "
        f"gone): {'; '.join(each)}.",
        "",
    ]


def reliance_note(results: dict) -> list[str]:
    """How much each pre-trained decoder reads its encoder (``source_reliance.py``)."""
    measured = results.get("source_reliance")
    if not measured:
        return []
    kept = results["pretraining"]
    current = {
        name: r
        for name, r in measured["checkpoints"].items()  # measured on the pre-training kept now
        if name in kept
        and r.get("checkpoint_sha256") is not None
        and r["checkpoint_sha256"] == kept[name].get("checkpoint_sha256")
    }
    unmeasured = [f"n = {r['ngram']}" for name, r in kept.items() if name not in current]
    if not current:
        return [
            "Whether the pre-trained decoder reads its encoder is not measured for the "
            f"pre-trainings above ({', '.join(unmeasured)}; `python -m "
            "reproduction.gigaword_10k.source_reliance`).",
            "",
        ]
    each = "; ".join(
        f"n = {kept[name]['ngram']}: {r['bits_own_source']:.2f} and "
        f"{r['bits_rolled_source']:.2f} (the source saves {r['bits_the_source_saves']:.2f})"
        for name, r in current.items()
    )
    lines = next(iter(current.values()))["lines"]
    during = "; ".join(
        f"n = {kept[name]['ngram']}: "
        + ", ".join(f"{c['bits_the_source_saves']:.2f}" for c in r["by_update"])
        + f" at updates {', '.join(str(c['update']) for c in r['by_update'])}"
        for name, r in current.items()
        if r.get("by_update")
    )
    apart = "; ".join(
        f"n = {kept[name]['ngram']}: {r['at_init']['encoder_between_line_share']:.3f} at random "
        "initialisation, then "
        + ", ".join(f"{c['encoder_between_line_share']:.3f}" for c in r["by_update"] or [r])
        + (" at the same updates" if r["by_update"] else " at the end")
        for name, r in current.items()
    )
    return [
        "Does the pre-trained decoder read its encoder? The next-token stream's loss on "
        f"{lines:,} lines of the pre-training corpus (its first batches, lines it was trained "
        "on; dropout off), in bits a token, with each line's own masked source and with another "
        f"line's: {each}."
        + (
            f" What the source saves at the pre-training's interval checkpoints: {during}."
            if during
            else ""
        )
        + " Does the encoder tell lines apart? The share of the variance of its output states on "
        "the same lines that lies between lines (each line's mean state against the batch's; 0 "
        f"when every line gets the same states on average): {apart}."
        + (
            f" Not measured yet for the pre-training above of {', '.join(unmeasured)}."
            if unmeasured
            else ""
        )
        + f" Written by `{measured['command']}` ({measured['wall_seconds']:.0f} s"
        + (f" in {measured['calls']} calls" if measured.get("calls", 1) > 1 else "")
        + "); one pre-training per n, so "
        "this describes these pre-trainings, not n in general.",
        "",
    ]


def splits_note(results: dict) -> str:
    """How the splits' titles differ, beside each row's ROUGE-1 on valid and on test."""
    splits = results["lead"]["splits"]

    def each(key: str, digits: int) -> str:
        return ", ".join(f"{name} {v[key]:.{digits}f}%" for name, v in splits.items())

    rows = [
        (
            "lead-8",
            CHOOSE_ON,
            results["lead"]["valid"][CHOOSE_ON]["8"]["rouge1"],
            results["lead"]["test"]["lead-8"]["rouge1"],
        )
    ]
    rows += [
        (m["label"], "valid1k", m["valid_rouge1"][0], m["test"]["rouge1"][0])
        for m in (results.get("models") or {}).values()
    ]
    scores = "; ".join(f"{name} {v:.2f} on {split}, {t:.2f} on test" for name, split, v, t in rows)
    copies = splits[TEST]["title_words_in_article"] < min(
        splits[v]["title_words_in_article"] for v in VALID
    )
    lower = "Every row scores lower on test than on valid"
    return (
        f"Valid and test are not alike: words of the title that are `UNK` / `<unk>`: "
        f"{each('title_words_oov', 2)}; titles holding one: {each('titles_with_oov', 1)}; "
        f"title words that occur in the article: {each('title_words_in_article', 1)} (mean over "
        "pairs). "
        f"{'Test titles copy less from their articles. ' if copies else ''}"
        f"{lower if all(t < v for *_, v, t in rows) else 'ROUGE-1 on valid and on test'}: "
        f"{scores}. Compare rows with each other on one split, and with the published rows on test "
        "only."
    )


def p_value(p: float, resamples: int) -> str:
    """A bootstrap p-value as text: 0 of ``resamples`` resamples is p < 1/resamples, not p = 0."""
    return f"p < {1 / resamples:g}" if p == 0 else f"p = {p:.3f}"


def seed_names(seeds: list) -> str:
    """'seed 1' or 'seeds 2, 3'."""
    return f"seed{'s' * (len(seeds) > 1)} {', '.join(map(str, seeds))}"


def cost_notes(models: dict) -> tuple[list[str], str]:
    """The rows' cost, one line a machine (``collect.cost_by_machine``: speeds measured on different
    machines are never pooled; a row's seeds are named where only some of them ran there), and the
    wall time of all runs, split by machine when there are several."""
    machines: dict = {}
    for m in models.values():
        for hw, c in m["cost"].items():
            seeds = "" if len(c["seeds"]) == len(m["seeds"]) else f" ({seed_names(c['seeds'])})"
            machines.setdefault(hw, []).append(
                (
                    f"{m['label']}{seeds}: {c['seconds_per_update']:.2f} s an update, "
                    f"{c['seconds_per_validation']:.0f} s a validation",
                    c["wall_seconds"],
                )
            )
    lines = [
        f"- on {hw}: " + "; ".join(text for text, _ in rows) + "."
        for hw, rows in sorted(machines.items())
    ]
    hours = {
        hw: sum(seconds for _, seconds in rows) / 3600 for hw, rows in sorted(machines.items())
    }
    total = f"{sum(hours.values()):.1f} h"
    if len(hours) == 1:
        return lines, f"{total} ({next(iter(hours))})"
    return lines, f"{total} (" + "; ".join(f"{hw}: {h:.1f} h" for hw, h in hours.items()) + ")"


def against(comparison: dict) -> str:
    """What the p-values of a claim with a margin test: the difference against the margin, not
    against 0."""
    return f" against a margin of {comparison['margin']:g}" if comparison.get("margin") else ""


def t_test(p: float) -> str:
    """A t-test p-value as text (kept to 4 decimals, so one under 0.001 reads as such, not as
    0.000)."""
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def ngram_reading(comparisons: list) -> list[str]:
    """What the decided verdicts say together for ProphetNet's claim (Qi et al. 2020, section 1: the
    future n-gram loss is a pre-training objective): the n = 2 against n = 1 gap after span
    pre-training, read beside what span pre-training does to each n; nothing before all are
    decided."""
    decided = {(c["row"], c["baseline"]): c for c in comparisons if c["decided"]}
    after, n1, n2 = (
        decided.get(pair) for pair in (("p2-pt", "p1-pt"), ("p1-pt", "p1"), ("p2-pt", "p2"))
    )
    if not (after and n1 and n2):
        return []
    text = (
        "Read together for ProphetNet's claim: after span pre-training, n = 2 against n = 1: "
        f'"{after["verdict"]}" ({after["delta_rouge1"]:+.2f}); span pre-training against none: '
        f'for n = 1 "{n1["verdict"]}" ({n1["delta_rouge1"]:+.2f}), for n = 2 "{n2["verdict"]}" '
        f"({n2['delta_rouge1']:+.2f})."
    )
    if (
        after["verdict"] == ESTABLISHED
        and n1["verdict"] == OPPOSITE
        and n2["verdict"] != ESTABLISHED
    ):
        text += (
            " So the gap after pre-training is n = 1 losing from span pre-training, not n = 2 "
            "gaining from it: at this table's sizes and pre-training length, it does not show "
            "that predicting further ahead makes pre-training pay."
        )
    return ["", text]


def p_values(comparison: dict) -> str:
    """A claim's tests as text: the bootstrap's p and, where both rows have seeds, the t-test's."""
    t = f", t-test {t_test(comparison['t_test_p'])}" if "t_test_p" in comparison else ""
    return f"bootstrap {p_value(comparison['bootstrap_p'], comparison['resamples'])}{t}"


def capped(comparison: dict) -> str:
    """What a claim's numbers stand on when a row it compares stopped at an update cap, not by early
    stopping."""
    seed_counts = dict(zip((comparison["row"], comparison["baseline"]), comparison["seeds"]))
    rows = [
        row if len(seeds) == seed_counts[row] else f"{row} ({seed_names(seeds)})"
        for row, seeds in (comparison.get("at_a_cap") or {}).items()
    ]
    return f"; {' and '.join(rows)} stopped at an update cap, not converged" if rows else ""


def _pm(pair: list) -> str:
    return f"{pair[0]:.2f}" if pair[1] is None else f"{pair[0]:.2f} ± {pair[1]:.2f}"


def stopped_by(m: dict) -> str:
    """Why the runs of a row stopped: the update cap (then not converged) or early stopping, with
    each reason's seeds where the row's runs stopped for more than one."""
    groups: dict = {}
    for seed, cap, why in zip(m["seeds"], m["caps"], m["stopped"]):
        groups.setdefault(("patience", 0) if why == EARLY_STOPPED else ("cap", cap), []).append(
            seed
        )

    def reason(key: tuple, seeds: list | None = None) -> str:
        names = seed_names(seeds) if seeds else ""
        if key[0] == "cap":
            return f"at the cap of {key[1]} updates, not converged" + (
                f" ({names})" if names else ""
            )
        return (
            f"by early stopping (patience {m['patience']}" + (f"; {names}" if names else "") + ")"
        )

    keys = sorted(groups)
    if len(keys) == 1:
        return f"stopped {reason(keys[0])}"
    named = [reason(key, groups[key]) for key in keys]
    return f"stopped {', '.join(named[:-1])} and {named[-1]}"


def published_gaps(results: dict, m: dict) -> str:
    """How far a trained row stands from lead-8, the lead-N chosen on valid and each published row
    (test ROUGE-1, mean over seeds). Against a lead row that a claim compares it with, the gap is
    the claim's difference (of the unrounded means), so that the two never differ by a rounding."""
    ours = m["test"]["rouge1"][0]
    claimed = {
        c["baseline"]: c["delta_rouge1"]
        for c in results.get("comparisons", [])
        if "delta_rouge1" in c and results["models"].get(c["row"]) is m
    }
    gaps = [
        f"{claimed.get(name, ours - scores['rouge1']):+.2f} to {name}"
        for name, scores in results["lead"]["test"].items()
    ]
    gaps += [
        f"{ours - p['rouge1']:+.2f} to the published {p['row'].split(' (')[0]}"
        for p in results["published"]
    ]
    return ", ".join(gaps)


def model_row(name: str, m: dict) -> str:
    """A trained row (``reproduction/gigaword_10k/collect.py``): mean ± sd over seeds."""
    how = (
        f"{len(m['seeds'])} seed{'s' if len(m['seeds']) > 1 else ''}; lr {'/'.join(m['lr'])}; "
        f"best checkpoint at updates {'/'.join(map(str, m['chosen_update']))}, lenpen "
        f"{'/'.join(m['chosen_lenpen'])}; distinct test headlines "
        f"{'/'.join(map(str, m['test_distinct']))} of {m['test_sentences']}; {stopped_by(m)}"
    )
    return (
        f"| {name} | {_pm(m['test']['rouge1'])} | {_pm(m['test']['rouge2'])} | "
        f"{_pm(m['test']['rougeL'])} | {_pm(m['valid_rouge1'])} (valid1k) | this repository "
        f"({how}) |"
    )


def so_far(comparison: dict) -> str:
    """'so far: ' before the numbers of a claim that waits for seeds (``SEEDS_FOR_A_VERDICT``)."""
    return "" if comparison["decided"] else "so far: "


def lr_grid_notes(results: dict) -> list[str]:
    """The learning-rate probes of the rows whose rate was chosen on valid (``--lr-grid``)."""
    if not results.get("lr_grid"):
        return []
    rows = []
    for row, grid in results["lr_grid"].items():
        probes = ", ".join(
            f"lr {lr}: {p['valid_rouge1']:.2f} at update {p['chosen_update']} ({p['distinct']} "
            f"distinct headlines; {stopped_by(p)})"
            for lr, p in grid["rates"].items()
        )
        runs = results["models"].get(row)
        rows.append(
            f"{grid['label']}: {probes}; "
            + (
                f"the row's runs so far use lr {'/'.join(runs['lr'])}"
                if runs
                else "the row's runs: not run yet"
            )
        )
    set_aside = [
        f"{r['label']}, seed {r['seed']}, lr {r['lr']}: valid1k ROUGE-1 {r['valid_rouge1']:.2f}, "
        f"test {r['test_rouge1']:.2f} ({r['test_distinct']} distinct headlines; `{r['record']}`)"
        for r in results.get("superseded", [])
    ]
    return [
        "",
        "Learning-rate probes on valid1k (`--lr-grid`: one probe per rate with seed 0, no "
        "evaluation seed, trained until it stops as the runs are, never decoded on test; once "
        "every rate of the grid has its probe, "
        "the best valid ROUGE-1 chooses the rate of the row's runs): " + "; ".join(rows) + ".",
    ] + (
        [
            "",
            "Set aside, out of the table: runs made at the recipe's rate before the grid chose "
            "another for their row "
            "(their test set was decoded once, before the choice): " + "; ".join(set_aside) + ".",
        ]
        if set_aside
        else []
    )


def lenpen_notes(models: dict) -> list[str]:
    """The length penalty of each row that a user script follows (``USER_SCRIPTS``), averaged over
    the row's converged seeds (``collect.lenpen_of_converged``): the best is that script's
    default."""
    rows = [
        f"{models[row]['label']}, `{script}` (from {seed_names(c['seeds'])}): "
        + ", ".join(f"{lp} {r:.2f}" for lp, r in c["mean_rouge1"].items())
        + f"; best {c['best']}"
        for row, script in USER_SCRIPTS.items()
        if row in models and (c := models[row].get("lenpen_of_converged"))
    ]
    return (
        [
            "",
            "Length penalty of the user scripts: valid1k ROUGE-1 of each length penalty at the "
            "best checkpoint, averaged over the row's seeds that stopped by early stopping; the "
            "best is the script's default: " + "; ".join(rows) + ".",
        ]
        if rows
        else []
    )


def model_notes(results: dict) -> list[str]:
    """The verdicts under the table, written from the comparisons of the collector (none before a
    row ran)."""
    if not results.get("models"):
        return []
    lines = [
        "Verdicts (test1951; a difference is established when the paired bootstrap over "
        "sentences of ROUGE-1 averaged over seeds and, where both rows have two seeds or more, "
        "a t-test paired by seed both give p < 0.05; a claim is decided once each trained row "
        f"it compares has {SEEDS_FOR_A_VERDICT} seeds):",
        "",
    ]
    for c in results["comparisons"]:
        if "delta_rouge1" not in c:
            lines.append(f"- {c['claim']}: {c['verdict']}.")
            continue
        lines.append(
            f"- {c['claim']}: **{c['verdict']}** ({so_far(c)}{c['row']} minus {c['baseline']}: "
            f"{c['delta_rouge1']:+.2f} ROUGE-1{against(c)}, {p_values(c)}; "
            f"{' and '.join(str(n) for n in c['seeds'] if n)} seeds{capped(c)})."
        )
    lines += ngram_reading(results["comparisons"])
    lines += lr_grid_notes(results)
    lines += lenpen_notes(results["models"])
    lines += [
        "",
        "How far each trained row stands (test ROUGE-1, mean over seeds; the published rows "
        "were scored with ROUGE-1.5.5):",
        "",
    ]
    lines += [f"- {m['label']}: {published_gaps(results, m)}." for m in results["models"].values()]
    costs, hours = cost_notes(results["models"])
    lines += [
        "",
        "Cost, from the runs' curves (one torch thread a run on the two shared cores; median "
        "over chunks):",
        "",
        *costs,
    ]
    m = next(iter(results["models"].values()))
    lines += [
        "",
        f"Model rows: trained in chunks of {m['chunk']} updates, valid ROUGE-1 after each (beam "
        f"4, no repeated trigram), stopped after {m['patience']} validations without a better "
        "one or at an update cap (given in the row; then marked not converged); the length "
        f"penalty chosen on valid; test decoded once. Wall time of all runs: {hours}.",
    ]
    lines += batches_note(results)
    if results.get("figure"):
        lines += [
            "",
            "![valid ROUGE-1 of every run and learning-rate probe until it stopped, lead-8 on "
            f"the same pairs dotted]({results['figure']})",
        ]
    return [*lines, ""]


def batches_note(results: dict) -> list[str]:
    """Which runs, learning-rate probes and set-aside runs (or which first updates of one) were
    trained while ``--unsorted-batches`` cut the batches again at each fairseq-train start, that is
    at each chunk, rather than at each epoch."""

    def named(label: str, old: dict) -> list[str]:
        whole = [int(s) for s, o in old.items() if o["all"]]
        return ([f"{label} {seed_names(whole)}"] if whole else []) + [
            f"{label} seed {s} up to update {o['up_to']}" for s, o in old.items() if not o["all"]
        ]

    models = results["models"]
    runs = [name for m in models.values() for name in named(m["label"], m["batches_cut_per_start"])]
    every = all(
        len(m["batches_cut_per_start"]) == len(m["seeds"])
        and all(o["all"] for o in m["batches_cut_per_start"].values())
        for m in models.values()
    )
    parts = (["every run above"] if every else runs) if runs else []
    probes = [
        (f"{g['label']} at lr {lr}", p["batches_cut_per_start"].get("0"))
        for g in results.get("lr_grid", {}).values()
        for lr, p in g["rates"].items()
    ]
    old = [name + ("" if o["all"] else f" up to update {o['up_to']}") for name, o in probes if o]
    if old:
        parts.append(
            "every learning-rate probe"
            if len(old) == len(probes) and all(o["all"] for _, o in probes)
            else "the learning-rate probes " + ", ".join(old)
        )
    parts += [
        f"the set-aside {name}"
        for r in results.get("superseded", [])
        for name in named(f"{r['label']}, lr {r['lr']},", r["batches_cut_per_start"])
    ]
    if not parts:
        return []
    return [
        "",
        "Batches: `--unsorted-batches` cuts them again at each epoch, from `--seed` and the "
        "epoch number, so a run trained in chunks (or resumed after a kill) trains on what one "
        "uninterrupted run does (`tests/test_reliability.py`). Until 2026-11-29 it cut them "
        "again at each fairseq-train start, so at each chunk, and a resumed run's batches "
        "depended on where it was resumed; trained that way: " + "; ".join(parts) + ".",
    ]


def summary(results: dict) -> str:
    """The page's summary lines above the table: the lead rows and the published rows, each
    trained row with its gaps to them, and what the table decides for the papers' claims
    (``collect.CLAIMS``)."""
    leads = "; ".join(
        f"{name}{'' if name == 'lead-8' else f' (N chosen on {CHOOSE_ON})'} {scores['rouge1']:.2f}"
        for name, scores in results["lead"]["test"].items()
    )
    published = "; ".join(
        f"{p['row'].split(' (')[0]}, published: {p['rouge1']:.2f}" for p in results["published"]
    )
    lines = [f"Test1951 ROUGE-1 (the table below): {leads}; {published}."]
    models = results.get("models") or {}
    if models:  # one line for all rows, so that the summary does not grow as rows land
        rows = [
            f"{m['label']} {_pm(m['test']['rouge1'])} ({len(m['seeds'])} "
            f"seed{'s' if len(m['seeds']) > 1 else ''}, {stopped_by(m)}: "
            f"{published_gaps(results, m)})"
            for m in models.values()
        ]
        lines.append(f"- Trained rows: {'; '.join(rows)}.")
    measured = [
        f"{c['claim']}: {c['verdict']} ({so_far(c)}{c['delta_rouge1']:+.2f} ROUGE-1{against(c)}, "
        f"{p_values(c)}{capped(c)})"
        for c in results.get("comparisons", [])
        if "delta_rouge1" in c
    ]
    if measured:
        lines.append(f"- Claims: {'; '.join(measured)}.")
    missing = [name for name in MODEL_ROWS if name not in {m["label"] for m in models.values()}]
    undecided = [c["claim"] for c in results.get("comparisons", []) if "delta_rouge1" not in c]
    if missing:
        lines.append(
            f"- Not run yet: {'; '.join(missing)}; so not decided: {'; '.join(undecided)}."
        )
    return "\n".join(lines) + "\n"

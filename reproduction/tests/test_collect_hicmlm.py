"""Table 1's tooling: the analysis' copy share uses the decoding rule's own fence, and
reproduction/hi_cmlm/collect_results.py turns per-run decodings into the table (mean and spread
over seeds, sacreBLEU's paired bootstrap and a seed-paired t-test against CMLM, the
training-input variants against the paper's training, length bins, passes, results page, runs
of an earlier call taken from its results file)."""

import json
import math
import shutil
import statistics
import subprocess
import sys

import pytest
import sacrebleu

from fairseq_ext.analysis.iterations import copy_counts
from tests.conftest import ROOT, cli_env, run

SCRIPT = ROOT / "reproduction" / "hi_cmlm" / "collect_results.py"


def test_copy_counts_follow_the_papers_fence():
    # target words y1..y6, y3 observed; the paper's fence (0, 1, 0, 1, 0, 1) gives Z to y2, y4, y6
    line = ["<unk>", "<unk>", "der", "<unk>", "<unk>", "<unk>"]
    assert copy_counts(line, "fence_replace") == (3.0, 5, 6)
    assert copy_counts(line, "fence_replace", fence_first="copy") == (2.0, 5, 6)  # y1 and y5
    assert copy_counts(line, "all_copied") == (5.0, 5, 6)
    assert copy_counts(line, "all_mask") == (0.0, 5, 6)
    assert copy_counts(line, "weighted_sum", 0.6)[0] == pytest.approx(2.0)


WORDS = "ein mann fährt fahrrad auf der straße im regen heute".split()


def _sentence(k: int) -> str:
    return " ".join(WORDS[(k + i) % len(WORDS)] for i in range(3 + k % 12))


def _corrupt(text: str, every: int) -> str:
    words = text.split()
    return " ".join("x" if every and i % every == 0 else w for i, w in enumerate(words))


def _write_decoding(path, refs, hyps, passes=10):
    """A fairseq-generate file with --retain-iter-history: 2 * passes - 1 history entries."""
    path.mkdir(parents=True)
    lines = []
    for i, (r, h) in enumerate(zip(refs, hyps)):
        pieces = " ".join("\u2581" + w for w in h.split())
        lines += [f"S-{i}\tsrc", f"T-{i}\t{r}", f"H-{i}\t-0.5\t{pieces}", f"D-{i}\t-0.5\t{h}"]
        lines += [f"E-{i}_{k}\t{pieces}" for k in range(2 * passes - 1)]
    (path / "generate.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (path / "hyp.txt").write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    (path / "seconds").write_text("7\n")
    ref_file = path / "ref.txt"
    ref_file.write_text("".join(r + "\n" for r in refs), encoding="utf-8")
    score = subprocess.run(
        ["sacrebleu", str(ref_file), "-i", str(path / "hyp.txt"), "-m", "bleu"],
        capture_output=True,
        text=True,
        env=cli_env(),
        check=True,
    ).stdout
    (path / "bleu.json").write_text(score)
    return sacrebleu.corpus_bleu(hyps, [refs]).score  # the CLI's JSON rounds to one decimal


@pytest.fixture()
def table(tmp_path):
    refs = [_sentence(k) for k in range(60)]
    ref = tmp_path / "ref.de"
    ref.write_text("".join(r + "\n" for r in refs), encoding="utf-8")
    work = tmp_path / "work"
    bleu = {}
    # CMLM corrupts every 3rd word, HI-CMLM fence every 5th or 6th, all_mask like CMLM
    plan = {
        ("cmlm", "cmlm"): (3, 3),
        ("hi_cmlm", "fence_replace"): (5, 6),
        ("hi_cmlm", "all_mask"): (3, 4),
    }
    for (name, dec), everies in plan.items():
        for seed, every in zip(("1", "2"), everies):
            run_dir = work / "runs" / f"{name}-seed{seed}"
            bleu[(name, dec, seed)] = _write_decoding(
                run_dir / f"decode-{dec}", refs, [_corrupt(r, every) for r in refs]
            )
            (run_dir / "train.log").write_text(
                "| num_updates 600 | ...\ndone training in 61.5 seconds\n"
            )
    teacher = work / "runs" / "ar_teacher-seed1" / "decode-ar"
    bleu[("ar", "ar", "1")] = _write_decoding(teacher, refs, refs, passes=0)
    return work, ref, bleu


def test_collect_builds_table_one(table, tmp_path):
    work, ref, bleu = table
    page = tmp_path / "hi-cmlm.md"
    page.write_text(
        "intro\n<!-- table1:start -->\nold table\n<!-- table1:end -->\nafter\n"
        "<!-- table1-findings:start -->\nold findings\n<!-- table1-findings:end -->\n"
    )
    run(
        [
            sys.executable,
            SCRIPT,
            "--work",
            work,
            "--ref",
            ref,
            "--root",
            tmp_path,
            "--meta",
            '{"command": "multi30k.sh"}',
            "--publish",
            tmp_path / "pub",
            "--page",
            page,
        ]
    )
    res = json.loads((work / "results.json").read_text())
    summary = res["summary"]
    assert list(summary) == ["ar_teacher", "cmlm", "hi_cmlm-all_mask", "hi_cmlm-fence_replace"]
    fence = [bleu[("hi_cmlm", "fence_replace", s)] for s in ("1", "2")]
    assert summary["hi_cmlm-fence_replace"]["bleu"]["mean"] == pytest.approx(
        statistics.fmean(fence)
    )
    assert summary["hi_cmlm-fence_replace"]["bleu"]["std"] == pytest.approx(statistics.stdev(fence))
    cmlm = [bleu[("cmlm", "cmlm", s)] for s in ("1", "2")]
    assert summary["hi_cmlm-fence_replace"]["delta_vs_cmlm"]["mean"] == pytest.approx(
        statistics.fmean(f - c for f, c in zip(fence, cmlm))
    )
    # BLEU after pass 10 of the history equals the final BLEU here (every pass is the output)
    assert summary["cmlm"]["bleu_after_pass"]["10"]["mean"] == pytest.approx(
        statistics.fmean(cmlm), abs=0.05
    )
    assert set(summary["cmlm"]["bleu_by_length"]) == {"[0,10)", "[10,23)", "[23,inf)"}
    # lower-case words without punctuation or hyphens: Moses' tokens are sacreBLEU's
    assert summary["cmlm"]["tokenized_bleu"]["mean"] == pytest.approx(
        statistics.fmean(cmlm), abs=0.01
    )
    assert res["runs"]["cmlm"]["1"]["tokenized_signature"].startswith("moses:de|compound-split")
    assert summary["cmlm"]["updates"] == [600] and res["compute_minutes_all_runs"] > 0
    # published: each run's hypotheses are kept beside the results file
    assert res["runs"]["cmlm"]["1"]["hypotheses"] == "pub/hypotheses/cmlm-seed1.txt"
    assert (tmp_path / "pub/hypotheses/cmlm-seed1.txt").read_text() == (
        work / "runs/cmlm-seed1/decode-cmlm/hyp.txt"
    ).read_text()
    # that run's paired bootstrap, recomputed with sacreBLEU directly
    test = summary["hi_cmlm-fence_replace"]["paired_bootstrap_vs_cmlm"]
    direct = subprocess.run(
        [
            "sacrebleu",
            str(ref),
            "-i",
            str(work / "runs/cmlm-seed1/decode-cmlm/hyp.txt"),
            str(work / "runs/hi_cmlm-seed1/decode-fence_replace/hyp.txt"),
            "-m",
            "bleu",
            "--paired-bs",
            "--paired-bs-n",
            "1000",
            "-f",
            "json",
        ],
        capture_output=True,
        text=True,
        env=cli_env(),
        check=True,
    ).stdout
    assert test["per_seed"]["1"] == pytest.approx(json.loads(direct)[1]["BLEU"]["p_value"])
    assert test["pooled"]["seeds"] == ["1", "2"] and 0 < test["pooled"]["p_value"] < 0.05
    assert "paired_bootstrap_vs_cmlm" not in summary["ar_teacher"]
    text = page.read_text()
    assert "old table" not in text and text.startswith("intro\n") and "\nafter\n" in text
    assert "old findings" not in text and "- **Paper's training against CMLM**" in text
    assert "| HI-CMLM + Fence Replace | 2 | 600 |" in text
    assert (tmp_path / "pub" / "results.md").read_text() == (work / "results.md").read_text()
    assert (tmp_path / "pub" / "figures" / "multi30k_bleu_per_pass.png").read_bytes()[
        :4
    ] == b"\x89PNG"


def test_collect_names_what_is_wrong(table, tmp_path):
    work, ref, _ = table
    short = tmp_path / "short.de"
    short.write_text("".join(line + "\n" for line in ref.read_text().splitlines()[:10]))
    proc = run([sys.executable, SCRIPT, "--work", work, "--ref", short], check=False)
    assert proc.returncode != 0 and "60 decoded sentences for 10 references" in proc.stderr
    assert "Traceback" not in proc.stderr
    page = tmp_path / "R.md"
    page.write_text("no markers\n")
    proc = run([sys.executable, SCRIPT, "--work", work, "--ref", ref, "--page", page], check=False)
    assert proc.returncode != 0 and "<!-- table1:start -->" in proc.stderr


def _t_test_p(diffs):
    """Two-sided p of the paired t-test on two seeds by hand: t with 1 degree of freedom is
    Cauchy, P(|T| > t) = 1 - 2 atan(t) / pi."""
    assert len(diffs) == 2
    mean = statistics.fmean(diffs)
    t = abs(mean) / (statistics.stdev(diffs) / math.sqrt(2))
    return 1 - 2 * math.atan(t) / math.pi


def test_a_later_call_adds_rows_and_tests_them_against_the_kept_runs(table, tmp_path):
    work, ref, bleu = table
    pub = tmp_path / "pub"
    env = cli_env()
    run(
        [
            sys.executable,
            SCRIPT,
            "--work",
            work,
            "--ref",
            ref,
            "--root",
            tmp_path,
            "--meta",
            '{"command": "first call"}',
            "--publish",
            pub,
        ]
    )
    first = json.loads((pub / "results.json").read_text())
    refs = ref.read_text().splitlines()
    later = tmp_path / "later"
    plan = {"hi_cmlm_decoding_rule": (4, 7), "hi_cmlm_copy0.25": (3, 5)}
    for name, everies in plan.items():
        for seed, every in zip(("1", "2"), everies):
            run_dir = later / "runs" / f"{name}-seed{seed}"
            bleu[(name, seed)] = _write_decoding(
                run_dir / "decode-fence_replace", refs, [_corrupt(r, every) for r in refs]
            )
            (run_dir / "train.log").write_text(
                "| num_updates 600 | ...\ndone training in 60 seconds\n"
            )
    shutil.rmtree(work)  # the first call's work folder is gone: its runs come from the results file
    run(
        [
            sys.executable,
            SCRIPT,
            "--work",
            later,
            "--ref",
            ref,
            "--root",
            tmp_path,
            "--meta",
            '{"command": "second call"}',
            "--kept",
            pub / "results.json",
            "--publish",
            pub,
        ]
    )
    res = json.loads((pub / "results.json").read_text())
    assert [c["command"] for c in res["calls"]] == ["first call", "second call"]
    summary = res["summary"]
    assert list(summary) == [
        "ar_teacher",
        "cmlm",
        "hi_cmlm-all_mask",
        "hi_cmlm-fence_replace",
        "hi_cmlm_copy0.25-fence_replace",
        "hi_cmlm_decoding_rule-fence_replace",
    ]
    for key in ("cmlm", "hi_cmlm-fence_replace"):
        assert summary[key]["bleu"] == first["summary"][key]["bleu"]
        assert res["runs"][key]["1"]["call"] == 0
    assert res["runs"]["hi_cmlm_copy0.25-fence_replace"]["2"]["call"] == 1
    # against the paper's training: a t-test paired by seed by hand, the bootstrap with sacreBLEU
    paper = [bleu[("hi_cmlm", "fence_replace", s)] for s in ("1", "2")]
    for name, key in (
        ("hi_cmlm_decoding_rule", "hi_cmlm_decoding_rule-fence_replace"),
        ("hi_cmlm_copy0.25", "hi_cmlm_copy0.25-fence_replace"),
    ):
        diffs = [bleu[(name, s)] - p for s, p in zip(("1", "2"), paper)]
        t = summary[key]["paired_t_vs_paper_training"]
        assert t["delta"]["mean"] == pytest.approx(statistics.fmean(diffs))
        assert t["p_value"] == pytest.approx(_t_test_p(diffs))
        direct = subprocess.run(
            [
                "sacrebleu",
                str(ref),
                "-i",
                str(pub / "hypotheses/hi_cmlm-fence_replace-seed2.txt"),
                str(pub / f"hypotheses/{key}-seed2.txt"),
                "-m",
                "bleu",
                "--paired-bs",
                "--paired-bs-n",
                "1000",
                "-f",
                "json",
            ],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout
        boot = summary[key]["paired_bootstrap_vs_paper_training"]
        assert boot["per_seed"]["2"] == pytest.approx(json.loads(direct)[1]["BLEU"]["p_value"])
        assert boot["pooled"]["seeds"] == ["1", "2"]
    cmlm = [bleu[("cmlm", "cmlm", s)] for s in ("1", "2")]
    assert summary["hi_cmlm-fence_replace"]["paired_t_vs_cmlm"]["p_value"] == pytest.approx(
        _t_test_p([p - c for p, c in zip(paper, cmlm)])
    )
    table_md = (pub / "results.md").read_text()
    assert "| HI-CMLM + Fence Replace, copy share 0.25 | 2 | 600 |" in table_md
    assert "Training input against the paper's" in table_md

    # a hypotheses file that is gone: its p-value is the one the results file recorded
    recorded = summary["hi_cmlm_copy0.25-fence_replace"]["paired_bootstrap_vs_paper_training"]
    (pub / "hypotheses/hi_cmlm-fence_replace-seed1.txt").unlink()
    run(
        [
            sys.executable,
            SCRIPT,
            "--work",
            later,
            "--ref",
            ref,
            "--root",
            tmp_path,
            "--kept",
            pub / "results.json",
            "--publish",
            pub / "again",
        ]
    )
    again = json.loads((pub / "again" / "results.json").read_text())["summary"][
        "hi_cmlm_copy0.25-fence_replace"
    ]
    assert again["paired_bootstrap_vs_paper_training"]["per_seed"]["1"] == recorded["per_seed"]["1"]
    assert again["paired_bootstrap_vs_paper_training"]["pooled"] == recorded["pooled"]


def _share_row(share: str, delta: float, p_t: float, pooled: float | None = None) -> dict:
    row = {
        "label": f"HI-CMLM + Fence Replace, copy share {share}",
        "seeds": ["1", "2", "3"],
        "paired_t_vs_paper_training": {
            "seeds": ["1", "2", "3"],
            "delta": {"mean": delta, "std": 0.2, "n": 3},
            "p_value": p_t,
        },
    }
    if pooled is not None:
        row["paired_bootstrap_vs_paper_training"] = {
            "per_seed": {},
            "pooled": {"seeds": ["1", "2", "3"], "p_value": pooled},
        }
    return row


@pytest.mark.parametrize(
    "rows, verdict",
    [
        # better on average and the t-test significant; no bootstrap could run: the rule is met
        ({"0.25": (0.9, 0.01, None), "0.75": (-0.4, 0.30, None)}, "0.25 met it."),
        # the bootstrap ran and is not significant: not met, though the t-test is
        (
            {"0.25": (0.9, 0.01, 0.20), "0.75": (-0.4, 0.30, None)},
            "no share met it, so the default stays 0.5.",
        ),
        # significantly worse is not better
        (
            {"0.25": (-1.5, 0.001, 0.001), "0.75": (0.3, 0.40, 0.30)},
            "no share met it, so the default stays 0.5.",
        ),
        ({"0.25": (0.6, 0.04, 0.01), "0.75": (1.1, 0.02, 0.03)}, "0.25, 0.75 met it."),
    ],
)
def test_the_copy_share_default_follows_the_rule_stated_before_the_sweep(rows, verdict):
    from reproduction.hi_cmlm import collect_results

    summary = {f"hi_cmlm_copy{s}-fence_replace": _share_row(s, *v) for s, v in rows.items()}
    text = collect_results.findings(summary)
    rule = [
        line for line in text.splitlines() if line.startswith("- **Default `--train-copy-share`**")
    ]
    assert len(rule) == 1 and rule[0].endswith(verdict), text


def test_two_seeds_judge_nothing_and_a_constant_difference_has_no_t_test():
    from reproduction.hi_cmlm import collect_results

    row = _share_row("0.75", 0.5, 0.001)
    row["seeds"] = row["paired_t_vs_paper_training"]["seeds"] = ["1", "2"]
    text = collect_results.findings({"hi_cmlm_copy0.75-fence_replace": row})
    assert "(2 seeds): not judged: 2 seeds, a difference needs at least 3" in text
    assert (
        "no share met it, so the default stays 0.5. The sweep is not complete: 0.75 has fewer "
        "than 3 seeds." in text
    )
    # sacreBLEU's one-decimal scores can differ by the same amount in every seed: the t statistic
    # is then undefined (scipy would report p = 0), so no p-value is given
    runs = {
        "a": {"1": {"bleu": 22.6}, "2": {"bleu": 23.0}},
        "b": {"1": {"bleu": 22.1}, "2": {"bleu": 22.5}},
    }
    t = collect_results.paired_t(runs, "a", "b")
    assert (
        t["p_value"] is None
        and t["constant_difference"]
        and t["delta"]["mean"] == pytest.approx(0.5)
    )
    assert "the same difference in every seed (t-test undefined)" in collect_results._tests(
        {"paired_t_x": t}, "x"
    )

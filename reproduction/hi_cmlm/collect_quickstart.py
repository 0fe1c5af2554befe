"""The quickstart's numbers from their results files: the block ``<!-- quickstart:start -->`` of
docs/results/hi-cmlm.md (how the shipped teacher and student were trained, the student's BLEU on
Multi30k val, what `make quickstart` measured, HI-CMLM's speed) and the line
``<!-- quickstart-summary:start -->`` of the README.

    python -m reproduction.hi_cmlm.collect_quickstart [--results work/quickstart/results.json]

--results: a results file `make quickstart` wrote, copied to reproduction/hi_cmlm/quickstart.json
before rendering. The other inputs are reproduction/hi_cmlm/shipped.json
(reproduction/hi_cmlm/shipped_models.sh: the student's training and its BLEU on val), the runs of
reproduction/hi_cmlm/quickstart_lr/ (``python -m reproduction.hi_cmlm.quickstart_lr``: the
continued student's BLEU by learning rate) and the hicmlm entry of
reproduction/benchmarks/results/cpu.json (`make bench`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
from pathlib import Path

from reproduction.benchmarks.hicmlm import student_digest
from reproduction.benchmarks.run import speedup_goals
from reproduction.hi_cmlm.collect_shipped import describe
from reproduction.results_page import write_between_markers

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "reproduction" / "hi_cmlm"
QUICKSTART, SHIPPED, LR_RUNS = (
    HERE / "quickstart.json",
    HERE / "shipped.json",
    HERE / "quickstart_lr",
)
BENCH = ROOT / "reproduction" / "benchmarks" / "results" / "cpu.json"
PAGE, README = ROOT / "docs" / "results" / "hi-cmlm.md", ROOT / "README.md"
PASSES = (1, 2, 4, 10)


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def lr_runs() -> list[dict]:
    """The kept runs of ``python -m reproduction.hi_cmlm.quickstart_lr``."""
    return [load(f) for f in sorted(LR_RUNS.glob("*.json"))]


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {int(round(seconds % 60))} s"


def _passes(decoding: dict) -> str:
    return " / ".join(f"{decoding['bleu_per_pass'][t - 1]:.1f}" for t in PASSES)


def _bins(decoding: dict) -> str:
    return " / ".join(f"{v:.1f}" for v in decoding["bleu_by_length"].values())


def _bin_names(decoding: dict) -> str:
    return " / ".join(decoding["bleu_by_length"])


def _layout(bench: dict) -> str:
    layout = bench["details"].get("student_layout")
    return f" ({layout})" if layout else ""


def _measured_on(bench: dict) -> str:
    """Which student the decoding speed was measured on: the shipped one, or one shipped before
    (bench results older than the digest record none)."""
    digest = bench["details"].get("student_sha256")
    if digest == student_digest():
        return "measured on the shipped student"
    return (
        "measured on a student shipped before this one (at a fixed number of passes the weights "
        "change the speed only through the predicted lengths; `make bench` measures the shipped "
        "one)"
    )


def _of_another_student(digest: str | None) -> str:
    """Nothing for results of the shipped student; else which one they were measured on."""
    if digest == student_digest():
        return ""
    return (
        f" (measured on a student shipped before this one, SHA-256 {digest[:12]}...)"
        if digest
        else " (measured on a student shipped before this one)"
    )


def _encoder_start(student: dict) -> str:
    # records made before the field existed: examples/quickstart/pretrain.sh then always started
    # the student's encoder from the teacher's
    return (
        "encoder from the teacher"
        if student.get("encoder_from_teacher", True)
        else "encoder from scratch"
    )


def page_block(quick: dict, shipped: dict, bench: dict, lr_runs: list[dict]) -> str:
    teacher, student = shipped["teacher"], shipped["student"]
    saved = shipped["models"]["new"]["training"]
    new = shipped["models"]["new"]["decodings"]["fence_replace"]
    old = shipped["models"]["old"]["decodings"]["fence_replace"]
    test = shipped["paired_bootstrap_new_vs_old"]["fence_replace"]
    s, c = quick["shipped"], quick["continued"]
    m = bench["metrics"]
    rows = [
        "| what | command | result |",
        "|---|---|---|",
        "| autoregressive teacher (`transformer` 3+3 x 192, Multi30k 29k pairs, sentencepiece "
        "6000) | `examples/quickstart/pretrain.sh` stages `data`, `teacher` "
        f"({teacher['stop_time_hours']:g} h of training, {teacher['updates']} updates) | distils "
        "the 29k training targets (beam 5); its BLEU is the autoregressive row of table 1 |",
        f"| student `{saved['arch']}` ({saved['hybrid_strategy']}), trained with "
        f"{describe(saved)} (its saved configuration) on the distilled targets, "
        f"{_encoder_start(student)} | `{student['command']}` ({student['updates']} updates, lr "
        f"{saved['lr'][0]:g}, {saved['max_tokens']} tokens per batch; "
        f"{_minutes(student['train_seconds'])} of training on {student['hardware']}) | "
        f"**{new['bleu']:.1f}** sacreBLEU on Multi30k `val` ({shipped['sentences']} sentences; "
        f"fence_replace, 10 passes, length beam 3); the student it replaced: {old['bleu']:.1f} "
        f"(p = {test['p_value']:.3f}, [all "
        "strategies](#the-shipped-student-against-the-one-it-replaced)) |",
        "| shipped `examples/quickstart/model/checkpoint.pt` (fp16 weights) on the "
        f"{quick['data']['test_sentences']} held-out quickstart sentences | `make quickstart`, "
        f"step 2 | **{s['bleu']:.1f}**; after pass 1/2/4/10: {_passes(s)}; by reference length "
        f"{_bin_names(s)}: {_bins(s)}{_of_another_student(quick.get('student_sha256'))} |",
        f"| `make quickstart` ({quick['training_minutes_budget']:g} more minutes of training on "
        f"the {quick['data']['train_pairs']:,} sample pairs' distilled targets, constant lr "
        f"{_rate(quick['training']['lr'])}, then decoding) | `{quick['command']}` | "
        f"**{c['bleu']:.1f}** after {quick['training']['updates']} more updates; after pass "
        f"1/2/4/10: {_passes(c)}; by reference length: {_bins(c)}; "
        f"{_minutes(quick['wall_seconds'])} end to end (venv built) on "
        f"{quick['hardware']['cpu']}, {quick['hardware']['cores']} cores (load average "
        f"{quick['hardware']['load_average_1_5_15_min'][1]:.1f} over the last 5 minutes), "
        f"{quick['date']} |",
    ]
    speed = (
        "HI-CMLM speed (`python -m reproduction.benchmarks.run --only hicmlm`, "
        f"{bench['hardware']}, side by side in one process; [Table 4](speed.md)): training "
        "tokens/s of `hi_cmlm_transformer` (fence_replace) over fairseq's `cmlm_transformer`, "
        f"both 3+3 x 192, **{m['hicmlm_train_tokens_per_s_ratio']:.3f}** (goal "
        f"{bench['goals']['hicmlm_train_tokens_per_s_ratio']}); peak RSS "
        f"{m['train_peak_rss_mb_hicmlm']:.0f} vs {m['train_peak_rss_mb_cmlm']:.0f} MB. "
        "Mask-predict (length beam 1) over the autoregressive teacher with beam 5, sentences/s "
        f"on the quickstart test sentences: **{m['maskpredict_vs_ar_speedup_b1_T4']:.1f}x** at "
        f"batch 1 with T = 4, **{m['maskpredict_vs_ar_speedup_b1_T10']:.1f}x** with T = 10; at "
        f"batch 64 {m['maskpredict_vs_ar_speedup_b64_T4']:.1f}x (T = 4) and "
        f"**{m['maskpredict_vs_ar_speedup_b64_T10']:.2f}x** (T = 10), "
        f"{_measured_on(bench)}{_layout(bench)}. {speedup_goals(bench)}{_teacher_input(bench)}"
    )
    return "\n".join(rows) + "\n\n" + learning_rates(lr_runs, s["bleu"]) + "\n\n" + speed + "\n"


def _teacher_input(bench: dict) -> str:
    """A sentence when the speed-ups were measured with the teacher given the student's input."""
    rows = bench.get("details", {}).get("decode_rows", [])
    if rows and all("teacher_input" in r for r in rows):
        return ""
    return (
        " These speed-ups were measured with the teacher given the student's input format "
        "(`<s>` in front), not its own, and against fairseq's Python beam search; against the "
        "teacher as users deploy it (CTranslate2) and with its own input: [the decoding "
        "bench](speed.md#mask-predict-against-the-engine-users-deploy-issue-76)."
    )


def _rate(lr: float) -> str:
    """A learning rate as the commands write it (5e-4)."""
    return f"{lr:.0e}".replace("e-0", "e-")


def learning_rates(runs: list[dict], shipped_bleu: float) -> str:
    """The continued student's BLEU by learning rate and seed, and the paired difference."""
    from scipy import stats

    by_lr: dict[float, dict[int, float]] = {}
    for r in runs:
        by_lr.setdefault(r["lr"], {})[r["seed"]] = r["bleu"]
    updates = {r["updates"] for r in runs}
    parts = []
    for lr in sorted(by_lr, reverse=True):
        seeds = by_lr[lr]
        values = [seeds[k] for k in sorted(seeds)]
        seeds_used = ", ".join(map(str, sorted(seeds)))
        spread = (
            f"seeds {seeds_used}; mean {statistics.mean(values):.2f} ± "
            f"{statistics.stdev(values):.2f}"
            if len(values) > 1
            else f"seed {seeds_used}"
        )
        parts.append(f"lr {_rate(lr)}: {' / '.join(f'{v:.1f}' for v in values)} ({spread})")
    digests = {r.get("student_sha256") for r in runs}
    other = (
        _of_another_student(digests.pop())
        if len(digests) == 1
        else " (the runs continued different students: rerun the script for the shipped one)"
    )
    text = (
        "Why `make quickstart` continues at a constant 1e-4 (`python -m "
        "reproduction.hi_cmlm.quickstart_lr`, `reproduction/hi_cmlm/quickstart_lr/`): the "
        "student ships without its optimizer state, and a fresh Adam's first steps move every "
        f"weight by about the learning rate. Continued for {'/'.join(map(str, sorted(updates)))} "
        "updates on the distilled sample and decoded as above"
        + (other if other else f" (shipped: {shipped_bleu:.1f})")
        + ", sacreBLEU by seed: "
        + "; ".join(parts)
        + "."
    )
    if len(by_lr) == 2:
        high, low = sorted(by_lr, reverse=True)
        paired = sorted(set(by_lr[high]) & set(by_lr[low]))
        if len(paired) >= 2:
            diff = [by_lr[low][k] - by_lr[high][k] for k in paired]
            p = stats.ttest_rel(
                [by_lr[low][k] for k in paired], [by_lr[high][k] for k in paired]
            ).pvalue
            verdict = "significant" if p < 0.05 else "not significant"
            text += (
                f" lr {_rate(low)} minus lr {_rate(high)}, paired by seed: "
                f"{statistics.mean(diff):+.2f} BLEU over {len(paired)} seeds (paired t-test p = "
                f"{p:.3f}, {verdict} at p < 0.05)."
            )
    if not other:
        text += (
            " Seeds above the shipped score: "
            + "; ".join(
                f"lr {_rate(lr)} {sum(v > shipped_bleu for v in by_lr[lr].values())} of "
                f"{len(by_lr[lr])}"
                for lr in sorted(by_lr, reverse=True)
            )
            + "."
        )
    return text + (
        " Training on 3,000 sentences for a few minutes (several passes over them) moves the "
        "score of a model trained on 29,000 by a few tenths either way; the spread between seeds "
        "above is the scale of that movement."
    )


def readme_line(quick: dict, shipped: dict) -> str:
    new = shipped["models"]["new"]["decodings"]["fence_replace"]["bleu"]
    return (
        f"`make quickstart` measured ({quick['date']}, {quick['hardware']['cores']} CPU cores, "
        "`reproduction/hi_cmlm/quickstart.json`): the shipped student gives "
        f"**{quick['shipped']['bleu']:.1f}** sacreBLEU on {quick['data']['test_sentences']} "
        f"held-out Multi30k sentences ({new:.1f} on Multi30k val), "
        f"**{quick['continued']['bleu']:.1f}** after {quick['training']['updates']} more updates "
        f"({quick['training_minutes_budget']:g} minutes), {_minutes(quick['wall_seconds'])} end "
        "to end.\n"
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--results", type=Path, help="a results file of make quickstart to publish first"
    )
    args = p.parse_args(argv)
    if args.results:
        shutil.copy(args.results, QUICKSTART)
    quick, shipped = load(QUICKSTART), load(SHIPPED)
    write_between_markers(
        PAGE,
        page_block(quick, shipped, load(BENCH)["benchmarks"]["hicmlm"], lr_runs()),
        "<!-- quickstart:start -->",
        "<!-- quickstart:end -->",
    )
    write_between_markers(
        README,
        readme_line(quick, shipped),
        "<!-- quickstart-summary:start -->",
        "<!-- quickstart-summary:end -->",
    )
    print(f"wrote the quickstart blocks of {PAGE.relative_to(ROOT)} and {README.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

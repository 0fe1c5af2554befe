"""Which layout the shipped quickstart student takes (issue 41): students of other encoder and
decoder depths, trained as the shipped one (examples/quickstart/pretrain.sh --student-arch /
--student-layers), decoded on Multi30k val beside it, with the work each does per sentence.

Mask-predict runs its whole decoder in each of its passes, so a decoding's cost is mostly the
decoder's depth times the passes; Kasai et al. 2021 ("Deep Encoder, Shallow Decoder", section 3)
move the layers into the encoder, which runs once. Each candidate (an exported checkpoint) is
decoded with fence_replace, 10 passes, length beam 3 (the quickstart's setting) on Multi30k val
and scored with sacreBLEU; sacreBLEU's paired bootstrap tests it against ``--baseline``; its
FLOPs and ATen operators per sentence are counted beside the teacher's
(``reproduction.benchmarks.maskpredict_work``). The student chosen is the candidate other than
the baseline with the highest val BLEU after 10 passes. Each candidate is also decoded as
``make bench`` decodes (length beam 1, 4 and 10 passes, each its own decoding), and the chosen
one with 10 passes is tested against the baseline with 4: whether it is a better point of speed
(the work bounds) against quality, not only faster at a fixed number of passes.

    python -m reproduction.hi_cmlm.student_layouts --data BIN --ref VAL_DE --work DIR
        --candidate NAME=CKPT[,LOG] ... --baseline NAME [--command TEXT] [--publish]

BIN: the binarized Multi30k with the shipped dictionary (pretrain.sh --stage data), whose valid
split is Multi30k val; LOG: the candidate's fairseq-train log (updates and training time).
``--publish`` writes ``reproduction/hi_cmlm/student_layouts.json`` (hypotheses beside it) and the
``student-layouts`` block of docs/results/hi-cmlm.md; a decoding already in DIR is not redone.
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

import sacrebleu

from reproduction.hi_cmlm.collect_results import (
    BOOTSTRAP_RESAMPLES,
    decoding_results,
    paired_bootstrap,
)
from reproduction.hi_cmlm.collect_shipped import training_log, training_settings
from reproduction.hi_cmlm.val_decode import decode
from reproduction.records import ROOT, repository_path, write_json
from reproduction.results_page import write_between_markers

RESULTS = ROOT / "reproduction" / "hi_cmlm" / "student_layouts.json"
PAGE = ROOT / "docs" / "results" / "hi-cmlm.md"
START, END = "<!-- student-layouts:start -->", "<!-- student-layouts:end -->"
SHOWN_PASSES = (1, 4, 10)
FAST_PASSES = (4, 10)  # the bench's pass counts with a goal


def candidate(text: str) -> tuple[str, Path, Path | None]:
    name, _, rest = text.partition("=")
    checkpoint, _, log = rest.partition(",")
    if not name or not checkpoint:
        raise argparse.ArgumentTypeError(f"{text!r}: write NAME=CHECKPOINT[,TRAIN_LOG]")
    return name, Path(checkpoint), Path(log) if log else None


def training_run(log: Path | None) -> dict | None:
    return None if log is None else {"log": repository_path(log), **training_log(log)}


def trained_updates(checkpoint: Path) -> int:
    from fairseq_ext.checkpoints import safe_load

    return safe_load(str(checkpoint))["optimizer_history"][-1]["num_updates"]


def collect(args) -> dict:
    from reproduction.benchmarks import maskpredict_work

    refs = args.ref.read_text(encoding="utf-8").splitlines()
    rows = {}
    for name, checkpoint, log in args.candidate:
        out = args.work / name
        decode(args.data, checkpoint, args.ref, out)
        work = maskpredict_work.counted(checkpoint)
        settings = {**training_settings(checkpoint), "updates": trained_updates(checkpoint)}
        fast = {}
        for (
            passes
        ) in FAST_PASSES:  # decoded as the bench decodes: length beam 1, each pass count on its own
            decode(
                args.data,
                checkpoint,
                args.ref,
                out / f"beam1-T{passes}",
                passes=passes,
                length_beam=1,
            )
            hyps = (out / f"beam1-T{passes}" / "hyp.txt").read_text(encoding="utf-8").splitlines()
            fast[str(passes)] = sacrebleu.corpus_bleu(hyps, [refs]).score
        rows[name] = {
            "checkpoint": repository_path(checkpoint),
            "layout": work["student_layout"],
            "student_sha256": work["student_sha256"],
            "training": settings,
            "training_run": training_run(log),
            **{
                k: v
                for k, v in decoding_results(out, out, refs, ROOT).items()
                if k in ("bleu", "signature", "bleu_per_pass")
            },
            "bleu_length_beam_1": fast,
            "bounds": maskpredict_work.bounds(work),
        }
    base = rows[args.baseline]
    for name in rows:
        if name != args.baseline:
            (p,) = paired_bootstrap(
                args.ref, args.work / args.baseline / "hyp.txt", [args.work / name / "hyp.txt"]
            )
            rows[name]["against_baseline"] = {
                "delta": rows[name]["bleu"] - base["bleu"],
                "p_value": p,
            }
    chosen = max((n for n in rows if n != args.baseline), key=lambda n: rows[n]["bleu"])
    few, many = FAST_PASSES
    (p,) = paired_bootstrap(
        args.ref,
        args.work / args.baseline / f"beam1-T{few}" / "hyp.txt",
        [args.work / chosen / f"beam1-T{many}" / "hyp.txt"],
    )
    frontier = {
        "delta": rows[chosen]["bleu_length_beam_1"][str(many)]
        - base["bleu_length_beam_1"][str(few)],
        "p_value": p,
    }
    return {
        "command": args.command,
        "reference": repository_path(args.ref),
        "sentences": len(refs),
        "decoding": (
            "fence_replace, 10 passes, length beam 3, --iter-decode-force-max-iter, batch 64"
        ),
        "bootstrap_resamples": BOOTSTRAP_RESAMPLES,
        "baseline": args.baseline,
        "chosen": chosen,
        "candidates": rows,
        "chosen_many_passes_against_baseline_few": frontier,
    }


def _yes_no(flag: bool | None) -> str:
    return "" if flag is None else "yes" if flag else "no"


def _bound_value(row: dict, batch: int, passes: int, kind: str) -> float:
    (b,) = [b for b in row["bounds"] if (b["batch"], b["passes"]) == (batch, passes)]
    return b[kind]


def _bound(row: dict, batch: int, passes: int, kind: str) -> str:
    return f"{_bound_value(row, batch, passes, kind):.2f}x"


def _frontier_verdict(chosen: dict, base: dict, test: dict, few: int, many: int) -> str:
    """Whether the chosen student with more passes is a better speed-quality point than the
    baseline with fewer: less work by both bounds, and no significant BLEU loss."""
    less = [
        _bound_value(chosen, batch, many, kind) > _bound_value(base, batch, few, kind)
        for batch, kind in ((64, "flops"), (1, "operators"))
    ]
    significant = test["p_value"] < 0.05
    if all(less) and not (significant and test["delta"] < 0):
        return (
            f"with {many} passes it does less work and loses no significant BLEU, a better point "
            f"than the baseline's {few}"
        )
    if not any(less) and not (significant and test["delta"] > 0):
        return (
            f"with {many} passes it does more work by both bounds and gains no significant BLEU, "
            f"so it is no better a point than the baseline with {few} passes; the shallow "
            "decoder pays at a fixed number of passes"
        )
    return "neither point is better on both axes"


def markdown(results: dict) -> str:
    lines = [
        f"Multi30k val ({results['sentences']} sentences), {results['decoding']}; p: sacreBLEU's "
        f"paired bootstrap ({results['bootstrap_resamples']} resamples) against "
        f"{results['baseline']}. Work: the teacher's (beam 5) count over the student's per "
        "sentence, FLOPs at batch 64 and ATen operators at batch 1 (`python -m "
        "reproduction.benchmarks.maskpredict_work`).",
        "",
        "| student | layout | architecture | encoder from the teacher | updates | training | "
        + " | ".join(f"BLEU pass {t}" for t in SHOWN_PASSES)
        + " | − baseline | p | FLOPs b64 T10 | operators b1 T10 | operators b1 T4 |",
        "|---|---|---|---|---:|---:|" + "---:|" * (len(SHOWN_PASSES) + 5),
    ]
    for name, row in results["candidates"].items():
        run = row["training_run"] or {}
        trained = f"{run['train_seconds'] / 60:.0f} min" if run.get("train_seconds") else ""
        test = row.get("against_baseline")
        lines.append(
            f"| {name}{' (chosen)' if name == results['chosen'] else ''} | {row['layout']} | "
            f"`{row['training']['arch']}` | {_yes_no(run.get('encoder_from_teacher'))} | "
            f"{row['training']['updates']} | {trained} | "
            + " | ".join(f"{row['bleu_per_pass'][t - 1]:.2f}" for t in SHOWN_PASSES)
            + " | "
            + (f"{test['delta']:+.2f} | {test['p_value']:.3f}" if test else " | ")
            + " | "
            + " | ".join(
                _bound(row, b, t, k)
                for b, t, k in ((64, 10, "flops"), (1, 10, "operators"), (1, 4, "operators"))
            )
            + " |"
        )
    few, many = FAST_PASSES
    lines += [
        "",
        f"Speed against quality, decoded as `make bench` decodes (length beam 1, {few} and "
        f"{many} passes, each its own decoding, on the same val sentences): val BLEU beside the "
        "work bound of that setting (teacher beam 5 over the student; `make bench` times these "
        "settings on the shipped student only).",
        "",
        "| student | passes | val BLEU, length beam 1 | FLOPs bound b64 | operators bound b1 |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, row in results["candidates"].items():
        for passes in FAST_PASSES:
            lines.append(
                f"| {name} | {passes} | {row['bleu_length_beam_1'][str(passes)]:.2f} | "
                f"{_bound(row, 64, passes, 'flops')} | {_bound(row, 1, passes, 'operators')} |"
            )
    chosen, base = (
        results["candidates"][results["chosen"]],
        results["candidates"][results["baseline"]],
    )
    test = chosen["against_baseline"]
    frontier = results["chosen_many_passes_against_baseline_few"]
    lines += [
        "",
        f"In plain words: the rule chooses {results['chosen']} (the highest val BLEU after 10 "
        f"passes besides {results['baseline']}); it scores {abs(test['delta']):.2f} BLEU "
        f"{'below' if test['delta'] < 0 else 'above'} {results['baseline']}, "
        f"{'significant' if test['p_value'] < 0.05 else 'not significant'} at p < 0.05 (p = "
        f"{test['p_value']:.3f}); after pass "
        + "/".join(map(str, SHOWN_PASSES))
        + " of the same decoding its difference is "
        + " / ".join(
            f"{chosen['bleu_per_pass'][t - 1] - base['bleu_per_pass'][t - 1]:+.2f}"
            for t in SHOWN_PASSES
        )
        + f". With {many} passes at length beam 1 it scores {frontier['delta']:+.2f} BLEU against "
        f"{results['baseline']} with {few} passes (p = {frontier['p_value']:.3f}); its work bounds "
        f"there are {_bound(chosen, 64, many, 'flops')} (FLOPs, batch 64) and "
        f"{_bound(chosen, 1, many, 'operators')} (operators, batch 1) against "
        f"{_bound(base, 64, few, 'flops')} and {_bound(base, 1, few, 'operators')}: "
        + _frontier_verdict(chosen, base, frontier, few, many)
        + (
            ". One training seed per layout, so the difference between layouts mixes layout and "
            "training noise."
        ),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--ref", type=Path, required=True)
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--candidate", type=candidate, action="append", required=True)
    p.add_argument("--baseline", required=True)
    p.add_argument("--command", default="")
    p.add_argument("--publish", action="store_true")
    args = p.parse_args(argv)
    names = [c[0] for c in args.candidate]
    if args.baseline not in names or len(names) < 2:
        p.error(
            f"--baseline {args.baseline}: name one of at least two --candidate entries "
            f"({', '.join(names)})"
        )
    for name, checkpoint, log in args.candidate:
        if not checkpoint.is_file() or (log is not None and not log.is_file()):
            p.error(
                f"--candidate {name}: {checkpoint if not checkpoint.is_file() else log} does not "
                "exist"
            )
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    results = collect(args)
    if args.publish:
        hypotheses = RESULTS.parent / "hypotheses"
        for name, row in results["candidates"].items():
            dest = hypotheses / f"student-layouts-{name.replace('+', 'p')}.txt"
            shutil.copy(args.work / name / "hyp.txt", dest)
            row["hypotheses"] = repository_path(dest)
        write_json(RESULTS, results)
        write_between_markers(PAGE, markdown(results), START, END)
    print(markdown(results), end="")


if __name__ == "__main__":
    main()

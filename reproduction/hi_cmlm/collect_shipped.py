"""The shipped quickstart student against the one it replaced (``--old-commit``'s file), decoded
with each strategy on Multi30k val: reproduction/hi_cmlm/shipped.json and the block
``<!-- shipped:start -->`` of docs/results/hi-cmlm.md.

    python -m reproduction.hi_cmlm.collect_shipped --work DIR --ref VAL_DE --old-commit REV
                        --teacher CKPT --student-log LOG --student-command TEXT --student-threads N
                        [--command TEXT] [--publish DIR] [--page FILE]

DIR (reproduction/hi_cmlm/shipped_models.sh's) holds old/ and new/, each a checkpoint.pt and
decode-<strategy>/ folders (generate.txt with every pass, hyp.txt, bleu.json, seconds). Per
model and strategy: BLEU after passes 1/2/4/10 and by reference length, and per strategy
sacreBLEU's paired bootstrap (1000 resamples) of the new model against the old one. Each
model's training settings are read from the checkpoint's saved configuration; the new one's
training run (updates, seconds, machine) from its fairseq-train log, the teacher's budget and
updates from the teacher checkpoint.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shutil
import sys
from pathlib import Path

from fairseq_ext.analysis.hardware import cpu_and_cores
from reproduction.hi_cmlm.collect_results import (
    BOOTSTRAP_RESAMPLES,
    PASSES,
    decoding_results,
    paired_bootstrap,
    relative,
)
from reproduction.results_page import write_between_markers

STRATEGIES = ("all_mask", "all_copied", "weighted_sum", "fence_replace")
MODELS = ("old", "new")
TRAINING_FIELDS = ("train_decoder_input", "train_copy_share", "fence_first", "hybrid_strategy")
START, END = "<!-- shipped:start -->", "<!-- shipped:end -->"


def training_settings(checkpoint: Path) -> dict:
    """How the checkpoint was trained, as its saved configuration says."""
    from fairseq_ext.checkpoints import safe_load

    state = safe_load(str(checkpoint))
    model, optimization = (
        vars(state["cfg"]["model"]),
        state["cfg"]["optimization"],
    )  # add_args: a Namespace
    return {
        "arch": model["arch"],
        "layers": f"{model['encoder_layers']}+{model['decoder_layers']}",
        **{k: model[k] for k in TRAINING_FIELDS},
        "max_update": optimization["max_update"],
        "lr": list(optimization["lr"]),
        "max_tokens": state["cfg"]["dataset"]["max_tokens"],
    }


def teacher_training(checkpoint: Path) -> dict:
    from fairseq_ext.checkpoints import safe_load

    state = safe_load(str(checkpoint))
    return {
        "stop_time_hours": state["cfg"]["optimization"]["stop_time_hours"],
        "updates": state["optimizer_history"][-1]["num_updates"],
    }


def training_log(log: Path) -> dict:
    """Updates and training seconds of a student's fairseq-train log, and whether its encoder
    started from the teacher's (``--init-encoder-from``). A resumed run appends segments: a segment
    ends at its "done training" line, or, when it was interrupted, where fairseq's wall clock starts
    again from zero; it counts its "done training" seconds, or else the last wall time it logged."""
    text = log.read_text(encoding="utf-8")
    updates = re.findall(r"num_updates[ =](\d+)", text)
    segments, last_wall, done = [], None, False
    for line in text.splitlines():
        finished = re.search(r"done training in ([\d.]+) seconds", line)
        wall = re.search(r"(?:\| |, )wall[ =]([\d.]+)", line)
        if finished:
            segments.append(float(finished.group(1)))
            last_wall, done = None, True
        elif wall:
            if last_wall is not None and float(wall.group(1)) < last_wall:
                segments.append(last_wall)
            last_wall, done = float(wall.group(1)), False
    if last_wall is not None:
        segments.append(last_wall)
    if not updates or not done:
        sys.exit(f"error: {log} has no finished training")
    return {
        "updates": int(updates[-1]),
        "train_seconds": round(sum(segments), 1),
        "segments": len(segments),
        "encoder_from_teacher": "initialised the encoder from" in text,
    }


def student_training(log: Path, command: str, threads: int, settings: dict) -> dict:
    return {
        "command": command,
        **training_log(log),
        "train_copy_share": settings["train_copy_share"],
        "hardware": f"{cpu_and_cores()}, {threads} torch thread{'s' if threads > 1 else ''}",
    }


def collect(work: Path, ref: Path, root: Path, hypotheses: Path | None) -> dict:
    refs = ref.read_text(encoding="utf-8").splitlines()
    models = {}
    for name in MODELS:
        folder = work / name
        decodes = {}
        for s in STRATEGIES:
            dec = folder / f"decode-{s}"
            if not (dec / "bleu.json").exists():
                sys.exit(
                    f"error: {dec}/bleu.json is missing: run reproduction/hi_cmlm/shipped_models.sh"
                )
            decodes[s] = decoding_results(folder, dec, refs, root)
            for k in ("updates", "train_seconds"):
                decodes[s].pop(k)
            if hypotheses is not None:
                hypotheses.mkdir(parents=True, exist_ok=True)
                dest = hypotheses / f"shipped-{name}-{s}.txt"
                shutil.copy(dec / "hyp.txt", dest)
                decodes[s]["hypotheses"] = relative(dest, root)
        models[name] = {
            "training": training_settings(folder / "checkpoint.pt"),
            "decodings": decodes,
        }
    tests = {}
    for s in STRATEGIES:
        (p,) = paired_bootstrap(
            ref,
            work / "old" / f"decode-{s}" / "hyp.txt",
            [work / "new" / f"decode-{s}" / "hyp.txt"],
        )
        tests[s] = {
            "delta": models["new"]["decodings"][s]["bleu"] - models["old"]["decodings"][s]["bleu"],
            "p_value": p,
        }
    return {"models": models, "paired_bootstrap_new_vs_old": tests}


def _f(x: float | None) -> str:
    return "" if x is None else f"{x:.2f}"


def describe(training: dict) -> str:
    """How a student was trained, from its saved configuration."""
    if training["train_decoder_input"] == "paper":
        how = f"the paper's input (section 3.3, copy share {training['train_copy_share']:g})"
    else:
        how = f"{training['hybrid_strategy']}'s decoding input"
    first = "copied" if training["fence_first"] == "copy" else "[MASK]"
    layers = f"{training['layers']} layers, " if "layers" in training else ""
    return f"{layers}{how}, first word {first}; {training['max_update']} updates"


def markdown(results: dict) -> str:
    models, tests = results["models"], results["paired_bootstrap_new_vs_old"]
    bins = list(models["new"]["decodings"]["fence_replace"]["bleu_by_length"])
    lines = [
        f"Multi30k val ({results['sentences']} sentences), 10 passes, length beam 3; old: "
        f"`examples/quickstart/model/checkpoint.pt` at commit {results['old_commit']} "
        f"({describe(models['old']['training'])}); new: the shipped file "
        f"({describe(models['new']['training'])}). p: sacreBLEU's paired bootstrap "
        f"({results['bootstrap_resamples']} resamples), new against old.",
        "",
        "| decoding | model | "
        + " | ".join(f"pass {t}" for t in PASSES)
        + " | new − old | p | "
        + " | ".join(bins)
        + " |",
        "|---|---|" + "---|" * (len(PASSES) + 2 + len(bins)),
    ]
    for s in STRATEGIES:
        for name in MODELS:
            d = models[name]["decodings"][s]
            passes = [_f(d["bleu_per_pass"][t - 1]) for t in PASSES]
            test = tests[s] if name == "new" else None
            lines.append(
                f"| {s} | {name} | "
                + " | ".join(passes)
                + " | "
                + (f"{test['delta']:+.1f} | {test['p_value']:.3f}" if test else " | ")
                + " | "
                + " | ".join(_f(d["bleu_by_length"][b]) for b in bins)
                + " |"
            )
    better = [s for s in STRATEGIES if tests[s]["delta"] > 0]
    significant = [s for s in STRATEGIES if tests[s]["p_value"] < 0.05]
    deltas = [tests[s]["delta"] for s in STRATEGIES]
    lines += [
        "",
        f"In plain words: the new model scores higher than the old one with {len(better)} of "
        f"{len(STRATEGIES)} strategies; after 10 passes new minus old is {min(deltas):+.1f} to "
        f"{max(deltas):+.1f} BLEU, significant (p < 0.05) for "
        + (", ".join(significant) if significant else "none of them")
        + ".",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--work", required=True)
    p.add_argument("--ref", required=True)
    p.add_argument("--old-commit", required=True)
    p.add_argument("--command", default="")
    p.add_argument("--teacher", required=True, type=Path)
    p.add_argument("--student-log", required=True, type=Path)
    p.add_argument("--student-command", required=True)
    p.add_argument("--student-threads", required=True, type=int)
    p.add_argument("--root", default=str(Path(__file__).resolve().parents[2]))
    p.add_argument("--publish", help="folder that gets shipped.json and hypotheses/")
    p.add_argument(
        "--page", help="Markdown file whose shipped markers get the table (docs/results/hi-cmlm.md)"
    )
    args = p.parse_args(argv)
    logging.getLogger().setLevel(logging.WARNING)
    work, ref, root = Path(args.work), Path(args.ref), Path(args.root).resolve()
    hypotheses = Path(args.publish) / "hypotheses" if args.publish else None
    results = {
        "command": args.command,
        "old_commit": args.old_commit,
        "reference": relative(ref, root),
        "sentences": len(ref.read_text(encoding="utf-8").splitlines()),
        "bootstrap_resamples": BOOTSTRAP_RESAMPLES,
        "hardware": cpu_and_cores(),
        **collect(work, ref, root, hypotheses),
    }
    results["teacher"] = {
        "checkpoint": relative(args.teacher, root),
        **teacher_training(args.teacher),
    }
    results["student"] = student_training(
        args.student_log,
        args.student_command,
        args.student_threads,
        results["models"]["new"]["training"],
    )
    text = json.dumps(results, indent=2) + "\n"
    (work / "shipped.json").write_text(text)
    table = markdown(results)
    print(table)
    if args.publish:
        (Path(args.publish) / "shipped.json").write_text(text)
    if args.page:
        write_between_markers(Path(args.page), table, START, END)
        print(f"wrote the shipped-model table into {args.page}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Results files of ``gigaword.sh``: one per scored point of training, and the run's summary.

    python examples/prophetnet/gigaword_point.py --work DIR --update N --lenpen X [--name NAME]
    [--checkpoint FILE]
        [--decode-seconds S]
    python examples/prophetnet/gigaword_point.py --work DIR --summary --model M ... [--patience P
    --validate-every V]
        --times T0 T1 T2 T3 T4

A point (``DIR/points/NAME.json``; NAME is N unless given, ``best`` for the checkpoint_best.pt
of ``--patience``) holds ROUGE-1/2/L F1 (``DIR/rouge-NAME.json``), the checkpoint decoded, the
length penalty it was decoded with, the number of distinct hypotheses among the validation
outputs (``DIR/hyp-NAME.title``; a model that ignores its source writes one headline for every
article) and fairseq's validation line at update ``N`` from ``DIR/finetune.log``: the loss and,
per predicting stream, the teacher-forced next-token accuracy (``acc_s1``, ``acc_s2``, ...;
``accuracy`` for the plain Transformer). The summary (``DIR/results.json``) gathers the points
with the run's settings, its commands (paths relative to the repository), its wall time summed
over the calls that made it, and the hardware; its scores are those of the last point, or with
``--patience`` of ``best``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def validation_line(log: Path, update: int) -> dict:
    """The last ``valid on 'valid' subset`` entry of fairseq's log at ``num_updates == update``,
    as ``{field: float}``."""
    found = None
    for line in log.read_text(errors="replace").splitlines():
        if "valid on 'valid' subset" not in line:
            continue
        fields = dict(re.findall(r"\| ([A-Za-z_0-9]+) ([-0-9.e]+)", line))
        if fields.get("num_updates") == str(update):
            found = {k: float(v) for k, v in fields.items()}
    if found is None:
        raise SystemExit(
            f"error: {log} has no validation at update {update}; fine-tune with "
            f"--validate-interval-updates dividing {update}"
        )
    return found


def stream_accuracy(valid: dict) -> list:
    """Per-stream validation accuracy (%) in stream order; the plain Transformer's one stream."""
    if "accuracy" in valid:
        return [valid["accuracy"]]
    return [valid[f"acc_s{k}"] for k in range(1, 64) if f"acc_s{k}" in valid]


def write_point(
    work: Path,
    update: int,
    lenpen: float,
    decode_seconds: float | None,
    name: str | None = None,
    checkpoint: str | None = None,
) -> dict:
    name = name or str(update)
    valid = validation_line(work / "finetune.log", update)
    for file in (f"rouge-{name}.json", f"hyp-{name}.title"):
        if not (work / file).exists():
            raise SystemExit(
                f"error: {work / file} is missing; decode and score update {update} first"
            )
    rouge = json.loads((work / f"rouge-{name}.json").read_text())
    hyps = (work / f"hyp-{name}.title").read_text().splitlines()
    point = {
        "update": update,
        "checkpoint": checkpoint,
        "lenpen": lenpen,
        "rouge1_f1": rouge["rouge1"],
        "rouge2_f1": rouge["rouge2"],
        "rougeL_f1": rouge["rougeL"],
        "sentences": rouge["sentences"],
        "distinct_hypotheses": len(set(hyps)),
        "valid_loss": valid.get("loss"),
        "valid_accuracy_per_stream": stream_accuracy(valid),
        "decode_seconds": decode_seconds,
    }
    (work / "points").mkdir(exist_ok=True)
    (work / "points" / f"{name}.json").write_text(json.dumps(point, indent=2) + "\n")
    print(
        f"update {update}: ROUGE-1 {point['rouge1_f1']:.2f}  ROUGE-2 {point['rouge2_f1']:.2f}  "
        f"ROUGE-L {point['rougeL_f1']:.2f}  distinct {point['distinct_hypotheses']}  accuracy "
        f"per stream {point['valid_accuracy_per_stream']}"
    )
    return point


def relative(command: str) -> str:
    return command.replace(str(ROOT) + "/", "").replace(str(ROOT), ".")


def hardware() -> dict:
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in open("/proc/cpuinfo")
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    return {
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }


def write_summary(work: Path, a) -> dict:
    points = sorted(
        (json.loads(p.read_text()) for p in (work / "points").glob("*.json")),
        key=lambda p: p["update"],
    )
    if not points:
        raise SystemExit(f"error: {work}/points holds no scored point")
    t = a.times
    this_call = {
        "data": t[1] - t[0],
        "pretrain": t[2] - t[1],
        "finetune": t[3] - t[2],
        "generate_and_score": t[4] - t[3],
    }
    path = work / "results.json"
    previous = json.loads(path.read_text()).get("wall_seconds", {}) if path.exists() else {}
    wall = {k: v + previous.get(k, 0) for k, v in this_call.items()}
    wall["total"] = sum(wall.values())
    scored, trained, stop = points[-1], points[-1]["update"], ""
    if a.patience:  # checkpoint_best.pt of fairseq's early stopping, and where training stopped
        best = work / "points" / "best.json"
        if not best.exists() or a.trained_updates is None:
            raise SystemExit(
                f"error: --patience needs {best} (decode and score checkpoint_best.pt first) and "
                "--trained-updates"
            )
        scored, trained = json.loads(best.read_text()), a.trained_updates
        if trained < a.finetune_updates:
            stop = (
                f"; stopped early: validation ROUGE-1 did not improve for {a.patience} "
                f"validation{'s' if a.patience > 1 else ''}"
            )
    result = {
        "model": a.model,
        "arch": a.arch,
        "ngram": a.ngram if a.model == "prophetnet" else None,
        "ngram_gamma": a.ngram_gamma if a.model == "prophetnet" else None,
        "seed": a.seed,
        "pretrain_updates": a.pretrain_updates,
        "finetune_updates": trained,
        "paper_recipe": a.paper == 1,
        "checkpoint": scored.get("checkpoint"),
        "scored_update": scored["update"],
        "lenpen": scored.get("lenpen"),
        "patience": a.patience,
        "validate_every": a.validate_every if a.patience else None,
        "rouge1_f1": scored["rouge1_f1"],
        "rouge2_f1": scored["rouge2_f1"],
        "rougeL_f1": scored["rougeL_f1"],
        "sentences": scored["sentences"],
        "points": points,
        "scorer": "fairseq_ext.analysis.rouge (rouge-score, stemmed, F1 x 100)",
        "commands": [relative(c) for c in (work / "commands.txt").read_text().splitlines()],
        "wall_seconds": wall,
        "hardware": hardware(),
    }
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"ROUGE-1 {scored['rouge1_f1']:.2f}  ROUGE-2 {scored['rouge2_f1']:.2f}  ROUGE-L "
        f"{scored['rougeL_f1']:.2f} at update {scored['update']} "
        f"({scored.get('checkpoint') or 'checkpoint'} of the {trained} fine-tuning "
        f"updates{stop}; {scored['sentences']} validation pairs; {wall['total']} s) -> {path}"
    )
    return result


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--work", required=True, type=Path)
    p.add_argument("--update", type=int)
    p.add_argument("--name", help="the point's name in file names (default: the update)")
    p.add_argument("--checkpoint", help="the file name of the checkpoint decoded")
    p.add_argument("--lenpen", type=float, help="the length penalty the point was decoded with")
    p.add_argument("--decode-seconds", type=float)
    p.add_argument("--summary", action="store_true")
    p.add_argument("--model")
    p.add_argument("--arch")
    p.add_argument("--ngram", type=int)
    p.add_argument("--ngram-gamma", type=float)
    p.add_argument("--seed", type=int)
    p.add_argument("--pretrain-updates", type=int)
    p.add_argument("--finetune-updates", type=int)
    p.add_argument("--paper", type=int, default=0)
    p.add_argument(
        "--patience", type=int, default=0, help="> 0: the scores are those of points/best.json"
    )
    p.add_argument("--validate-every", type=int)
    p.add_argument(
        "--trained-updates", type=int, help="with --patience: the update training stopped at"
    )
    p.add_argument("--times", type=int, nargs=5)
    a = p.parse_args(argv)
    if a.summary:
        if a.times is None or a.model is None:
            p.error("--summary needs --model and --times")
        write_summary(a.work, a)
    elif a.update is None or a.lenpen is None:
        p.error("give --update N --lenpen X (a point) or --summary")
    else:
        write_point(a.work, a.update, a.lenpen, a.decode_seconds, a.name, a.checkpoint)


if __name__ == "__main__":
    main()

"""Write the results file of `make quickstart` (examples/quickstart/run.sh): sacreBLEU of the
shipped checkpoint and of the continued one on the held-out sentences, BLEU after each
mask-predict pass and by reference length (HI-CMLM, Wang et al. 2021, Table 2 and Figure 2, as
``python -m fairseq_ext.analysis`` measures them), the shipped student's SHA-256, the updates the
training reached, wall times
and the machine (with its load average when the run ends: other work on the cores slows the
training, which then reaches fewer updates in its minutes).

    python examples/quickstart/results.py --work DIR --minutes M --start EPOCH_SECONDS --out FILE
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import time
from pathlib import Path

import torch

from fairseq_ext.analysis.hardware import cpu_name

DECODINGS = ("shipped", "continued")


def training(log: Path) -> dict:
    text = log.read_text(encoding="utf-8")
    updates = re.findall(r"num_updates (\d+)", text)
    seconds = re.findall(r"done training in ([\d.]+) seconds", text)
    lr = re.search(r"'lr': \[([^\]]+)\]", text)  # the configuration fairseq-train logs first
    return {
        "updates": int(updates[-1]) if updates else 0,
        "seconds": float(seconds[-1]) if seconds else None,
        "lr": float(lr.group(1)) if lr else None,
    }


def decoding(work: Path, name: str, analysis: dict) -> dict:
    bleu = json.loads((work / name / "bleu.json").read_text(encoding="utf-8"))
    return {
        "bleu": bleu["score"],
        "signature": bleu["signature"],
        "bleu_per_pass": analysis[name]["bleu_per_iteration"],
        "bleu_by_length": analysis[name]["bleu_by_length"],
        "seconds": int((work / name / "seconds").read_text()),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--work", required=True, type=Path)
    p.add_argument("--minutes", required=True, type=float)
    p.add_argument(
        "--start",
        required=True,
        type=int,
        help="when make quickstart started (seconds since the epoch)",
    )
    p.add_argument("--out", required=True, type=Path)
    args = p.parse_args(argv)
    analysis = json.loads((args.work / "analysis" / "analysis.json").read_text(encoding="utf-8"))
    lines = lambda path: sum(1 for _ in open(path, encoding="utf-8"))  # noqa: E731
    data = Path(__file__).resolve().parent / "data"
    shipped = Path(__file__).resolve().parent / "model" / "checkpoint.pt"
    results = {
        "command": "make quickstart"
        + (f" (QUICKSTART_MINUTES={args.minutes:g})" if args.minutes != 3 else ""),
        "date": datetime.date.today().isoformat(),
        "data": {
            "train_pairs": lines(data / "train.en"),
            "test_sentences": lines(data / "test.en"),
        },
        "student_sha256": hashlib.sha256(shipped.read_bytes()).hexdigest(),
        "decoding": "mask-predict, 10 passes (--iter-decode-max-iter 9), length beam 3, "
        "--length-offset 3, --length-offset-ramp 9, --remove-repeats 3 (per-pass BLEU: before the "
        "removal)",
        "training_minutes_budget": args.minutes,
        "training": training(args.work / "train.log"),
        **{name: decoding(args.work, name, analysis) for name in DECODINGS},
        "wall_seconds": round(time.time() - args.start),
        "hardware": {
            "cpu": cpu_name(),
            "cores": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "load_average_1_5_15_min": [round(x, 2) for x in os.getloadavg()],
        },
    }
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

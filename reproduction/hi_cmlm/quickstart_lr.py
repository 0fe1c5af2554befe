"""Why `make quickstart` continues the shipped student at a constant learning rate of 1e-4: the
student continued for a fixed number of updates on the distilled sample, at each ``--lrs``
value and ``--seeds`` seed, decoded as the quickstart decodes, scored with sacreBLEU.

    python -m reproduction.hi_cmlm.quickstart_lr [--lrs 5e-4 1e-4] [--seeds 1 2 3] [--updates 85]
        [--work work/quickstart_lr]

The student was trained with lr 1e-3, inverse square root after 1000 warm-up updates, for 4000
updates (its final rate 5e-4), and ships without its optimizer state (weights only). A fresh
Adam's first steps move each weight by about the learning rate whatever its gradient's size, so
restarting at the final rate is not continuing the run; this measures what each rate does. The
training is examples/quickstart/run.sh's step 3 with ``--max-update`` instead of a time budget
(every run the same number of updates), the decoding its step 4 (10 passes, length beam 3) on
the 500 held-out quickstart sentences. One JSON per run in ``reproduction/hi_cmlm/quickstart_lr/``
(commands, seed, the continued student's SHA-256, BLEU, training and decoding seconds, hardware,
the hypotheses); a run whose file exists for the shipped student is not run again.
``collect_quickstart`` renders them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import sacrebleu

from fairseq_ext.analysis.hardware import cpu_and_cores
from reproduction.benchmarks.hicmlm import student_digest
from reproduction.records import repository_path, write_json

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"
KEPT = ROOT / "reproduction" / "hi_cmlm" / "quickstart_lr"
BIN = Path(sys.executable).parent


def sh(cmd: list, log: Path, env: dict) -> None:
    with log.open("w") as f:
        if subprocess.run(
            [str(c) for c in cmd], stdout=f, stderr=subprocess.STDOUT, env=env
        ).returncode:
            raise SystemExit(f"failed: {' '.join(map(str, cmd))} (see {log})")


def prepare(work: Path, env: dict) -> Path:
    """The quickstart's step 1: the sample through the shipped sentencepiece model, the
    distilled training targets, fairseq-preprocess with the shipped dictionary."""
    data, model, spm = QUICKSTART / "data", QUICKSTART / "model", work / "spm"
    if (work / "bin" / "dict.de.txt").is_file():
        return work / "bin"
    spm.mkdir(parents=True, exist_ok=True)
    for split in ("train", "valid", "test"):
        for lang in ("en", "de"):
            src = data / (
                "train.distilled.de" if (split, lang) == ("train", "de") else f"{split}.{lang}"
            )
            with src.open() as fin, (spm / f"{split}.{lang}").open("w") as fout:
                subprocess.run(
                    [
                        sys.executable,
                        ROOT / "data_prep" / "spm.py",
                        "encode",
                        "--model",
                        model / "spm.model",
                    ],
                    stdin=fin,
                    stdout=fout,
                    check=True,
                    env=env,
                )
    sh(
        [
            BIN / "fairseq-preprocess",
            "-s",
            "en",
            "-t",
            "de",
            "--trainpref",
            spm / "train",
            "--validpref",
            spm / "valid",
            "--testpref",
            spm / "test",
            "--srcdict",
            model / "dict.txt",
            "--joined-dictionary",
            "--destdir",
            work / "bin",
            "--workers",
            "1",
        ],
        work / "preprocess.log",
        env,
    )
    return work / "bin"


def train_command(data: Path, lr: str, seed: int, updates: int, save: Path) -> list:
    """examples/quickstart/run.sh's fairseq-train, with --max-update instead of
    --stop-time-hours."""
    return [
        "fairseq-train",
        data,
        "--user-dir",
        ROOT / "fairseq_ext",
        "--task",
        "cmlm_hybrid",
        "-s",
        "en",
        "-t",
        "de",
        "--arch",
        "hi_cmlm_transformer_tiny",
        "--encoder-layers",
        "3",
        "--decoder-layers",
        "1",
        "--hybrid-strategy",
        "fence_replace",
        "--train-decoder-input",
        "paper",
        "--train-copy-share",
        "0.5",
        "--fence-first",
        "mask",
        "--finetune-from-model",
        QUICKSTART / "model" / "checkpoint.pt",
        "--criterion",
        "nat_loss",
        "--label-smoothing",
        "0.1",
        "--optimizer",
        "adam",
        "--adam-betas",
        "(0.9,0.98)",
        "--lr",
        lr,
        "--lr-scheduler",
        "fixed",
        "--clip-norm",
        "1.0",
        "--dropout",
        "0.1",
        "--max-tokens",
        "4096",
        "--max-update",
        updates,
        "--max-epoch",
        "100",
        "--save-dir",
        save,
        "--no-epoch-checkpoints",
        "--log-format",
        "simple",
        "--log-interval",
        "20",
        "--seed",
        seed,
    ]


def decode_command(data: Path, checkpoint: Path) -> list:
    """examples/quickstart/run.sh's fairseq-generate (10 passes, length beam 3)."""
    return [
        "fairseq-generate",
        data,
        "--user-dir",
        ROOT / "fairseq_ext",
        "--task",
        "cmlm_hybrid",
        "-s",
        "en",
        "-t",
        "de",
        "--path",
        checkpoint,
        "--gen-subset",
        "test",
        "--batch-size",
        "64",
        "--iter-decode-max-iter",
        "9",
        "--iter-decode-with-beam",
        "3",
        "--iter-decode-force-max-iter",
        "--post-process",
        "sentencepiece",
    ]


def hypotheses(generate_output: str) -> list[str]:
    rows = sorted(
        (int(line.split("\t")[0][2:]), line.split("\t")[2])
        for line in generate_output.splitlines()
        if line.startswith("D-")
    )
    return [text for _, text in rows]


def run_one(work: Path, data: Path, lr: str, seed: int, updates: int, env: dict) -> dict:
    kept = KEPT / f"lr{lr}-s{seed}.json"
    student = student_digest(QUICKSTART / "model" / "checkpoint.pt")
    if kept.is_file() and json.loads(kept.read_text()).get("student_sha256") == student:
        return json.loads(kept.read_text())
    run = work / f"lr{lr}-s{seed}"
    train = train_command(data, lr, seed, updates, run / "ckpt")
    trained = (run / "train.log").is_file() and "done training" in (run / "train.log").read_text()
    if not trained:  # a run trained before an interruption is decoded, not trained again
        shutil.rmtree(run, ignore_errors=True)
        run.mkdir(parents=True)
        sh([BIN / train[0], *train[1:]], run / "train.log", env)
    t_decode = time.time()
    decode = decode_command(data, run / "ckpt" / "checkpoint_last.pt")
    out = subprocess.run(
        [str(BIN / decode[0]), *map(str, decode[1:])], capture_output=True, text=True, env=env
    )
    if out.returncode:
        raise SystemExit(f"decoding failed:\n{out.stderr[-2000:]}")
    hyps = hypotheses(out.stdout)
    refs = (QUICKSTART / "data" / "test.de").read_text(encoding="utf-8").splitlines()
    if len(hyps) != len(refs):
        raise SystemExit(f"{len(hyps)} hypotheses for {len(refs)} references")
    metric = sacrebleu.BLEU()
    bleu = metric.corpus_score(hyps, [refs])
    result = {
        "lr": float(lr),
        "seed": seed,
        "updates": updates,
        "student_sha256": student,
        "bleu": round(bleu.score, 2),
        "signature": str(metric.get_signature()),
        "train_command": " ".join(
            repository_path(c) if isinstance(c, Path) else str(c) for c in train
        ),
        "decode_command": " ".join(
            repository_path(c) if isinstance(c, Path) else str(c) for c in decode
        ),
        "train_seconds": float(
            re.findall(r"done training in ([\d.]+) seconds", (run / "train.log").read_text())[-1]
        ),
        "decode_seconds": round(time.time() - t_decode, 1),
        "hardware": f"{cpu_and_cores()}, torch threads 1",
        "load_average_1_5_15_min": list(os.getloadavg()),
        "hypotheses": hyps,
    }
    write_json(kept, result)
    shutil.rmtree(run)
    print(
        f"lr {lr} seed {seed}: BLEU {result['bleu']} (training {result['train_seconds']:.0f} s, "
        f"decoding {result['decode_seconds']:.0f} s)",
        flush=True,
    )
    return result


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--lrs", nargs="+", default=["5e-4", "1e-4"])
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    p.add_argument(
        "--updates", type=int, default=85, help="the updates make quickstart's 3 minutes reached"
    )
    p.add_argument("--work", type=Path, default=ROOT / "work" / "quickstart_lr")
    a = p.parse_args(argv)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    data = prepare(a.work, env)
    for seed in a.seeds:
        for lr in a.lrs:
            run_one(a.work, data, lr, seed, a.updates, env)


if __name__ == "__main__":
    main()

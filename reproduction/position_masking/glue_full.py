"""GLUE at the published fine-tuning budget (BERT's recipe, Devlin et al. 2019, section 4.1 and
appendix A.3: batch 32, 3 epochs, the learning rate chosen per task on dev), from
all-MiniLM-L6-v2, to re-decide the enhanced dropout gradient of Wagner et al. 2020 (section
2.2, ``--attention-dropout-straight-through``) on models that have learned their task.

    python -m reproduction.position_masking.glue_full [--work work/glue_full] [--glue DIR]
        [--tasks CoLA SST-2] [--epochs CoLA=3 SST-2=1] [--lrs 2e-5 5e-5 1e-4] [--seeds 1 2 3 4 5]
        [--curve-points 6] [--jobs 1]

1. MiniLM converted (``python -m fairseq_ext.convert from-transformers``); all of CoLA's and
   SST-2's training sentences through ``data_prep/glue.py`` (no ``--train-limit``).
2. Learning rate, per task: each ``--lrs`` value fine-tunes MiniLM (ordinary dropout, seed 0,
   which is no evaluation seed); the best final dev score chooses.
3. Fine-tuning: for each ``--seeds`` value, ordinary dropout and straight-through, at the
   chosen rate, for ``--epochs`` epochs of batch 32 (6% warm-up, linear decay to 0), with
   ``--curve-points`` dev validations (the curves that show whether the score stopped
   improving). The final checkpoint's dev predictions are scored by scikit-learn
   (``python -m fairseq_ext.analysis.glue``): every arm at the same number of updates.

Each finished run is kept as one JSON file in ``RESULTS`` (``<task>/<run>.json``: the command,
seed, wall time, hardware, the dev curve, the dev score and every dev prediction), which is
committed; a run whose file exists is not run again, so the table grows over several sessions.
A run's file is refused for resumption when it was made with other settings than asked now.
A run stopped part-way (its process killed) continues from its last complete checkpoint, one
at every dev validation with the optimizer's state (the last two kept in ``--work``), and ends
with the weights of an uninterrupted run; its record lists the segments (the update each
started from, wall time with the work redone after the kill, CPU time where its process ended).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fairseq_ext.checkpoints.saving import newest_complete_checkpoint
from reproduction.position_masking.glue_run import ROOT, TASKS, Driver, validations
from reproduction.records import repository_path, write_json

RESULTS = ROOT / "reproduction" / "position_masking" / "results" / "glue_full"
LRS = ("2e-5", "5e-5", "1e-4")  # the learning-rate grid (--lrs), BERT's recipe
BATCH = 32
WARMUP_SHARE = 0.06
DEFAULT_EPOCHS = {"CoLA": 3, "SST-2": 1}
PROGRESS = "progress.json"  # a running run's settings and segments, in its work folder
INTERVAL = re.compile(r"checkpoint_\d+_(\d+)\.pt$")  # fairseq's checkpoint at a validation


def interrupted_segments(run: Path, asked: dict) -> list[dict]:
    """The segments an interrupted run of these settings has trained (its ``PROGRESS`` file), the
    last one closed at its log's last write: [] where there is nothing of these settings to
    continue."""
    try:
        progress = json.loads((run / PROGRESS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if progress.get("asked") != asked:
        return []
    segments = progress["segments"]
    last = segments[-1]
    if (
        "started" in last
    ):  # its process was killed: wall time up to its last log line, CPU time unknown
        ended = (
            (run / "train.log").stat().st_mtime
            if (run / "train.log").is_file()
            else last["started"]
        )
        segments[-1] = {
            "from_update": last["from_update"],
            "cpu_seconds": None,
            "wall_seconds": round(max(0.0, ended - last["started"]), 1),
        }
    return segments


def last_per_update(rows: list[dict]) -> list[dict]:
    """One validation per update count, the last logged: a run continued from a checkpoint repeats
    the validations its killed process had logged after that checkpoint."""
    return list({row.get("num_updates"): row for row in rows}.values())


def epochs_option(text: str) -> tuple[str, float]:
    task, _, value = text.partition("=")
    if task not in TASKS or not value:
        raise argparse.ArgumentTypeError(
            f"{text!r}: write TASK=EPOCHS with TASK one of {', '.join(TASKS)}"
        )
    number = float(value)
    if not number > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the number of epochs must be > 0")
    return task, number


class FullBudget(Driver):
    """``glue_run.Driver``'s commands and records at the published budget, one JSON per run."""

    def __init__(self, a: argparse.Namespace):
        super().__init__(a)
        self.results = a.results.resolve()

    def prepare(self) -> None:
        w, py = self.work, sys.executable
        w.mkdir(parents=True, exist_ok=True)
        if not (self.minilm / "converted" / "model.pt").is_file():
            self.sh(
                [
                    py,
                    "-c",
                    "import all_minilm_l6_v2, sys; all_minilm_l6_v2.extract_model(sys.argv[1])",
                    self.minilm,
                ]
            )
            self.sh(
                [
                    py,
                    "-m",
                    "fairseq_ext.convert",
                    "from-transformers",
                    self.minilm / "all-MiniLM-L6-v2",
                    self.minilm / "converted",
                ],
                w / "convert.log",
            )
        for task in self.a.tasks:
            if (w / "data" / task / "bin" / "label" / "valid.bin").is_file():
                continue
            local = ["--local", self.a.glue] if self.a.glue else []
            self.sh(
                [
                    py,
                    ROOT / "data_prep" / "glue.py",
                    "--task",
                    task,
                    *local,
                    "--tokenizer",
                    self.minilm / "all-MiniLM-L6-v2",
                    "--dict",
                    self.minilm / "converted" / "dict.txt",
                    "--out",
                    w / "data" / task,
                    "--max-tokens",
                    "126",
                ],
                w / f"glue-{task}.log",
            )

    def updates(self, task: str) -> int:
        train = (
            (self.work / "data" / task / "raw" / "train.label").read_text(encoding="utf-8").split()
        )
        return math.ceil(self.a.epochs[task] * math.ceil(len(train) / BATCH))

    def record(self, task: str, name: str) -> Path:
        return self.results / task / f"{name}.json"

    def finetune_run(self, task: str, name: str, st: bool, seed: int, lr: str) -> dict:
        """One fine-tuning of MiniLM, or its kept record when it exists with these settings; a run
        stopped part-way (its process killed) continues from its last complete checkpoint."""
        u = self.updates(task)
        asked = {
            "task": task,
            "straight_through": st,
            "seed": seed,
            "lr": float(lr),
            "updates": u,
            "batch": BATCH,
        }
        kept = self.record(task, name)
        if kept.is_file():
            done = json.loads(kept.read_text(encoding="utf-8"))
            if any(done.get(k) != v for k, v in asked.items()):
                raise SystemExit(
                    f"{repository_path(kept)} was made with other settings than asked now "
                    f"({asked}); remove it or ask for its settings"
                )
            return done
        run = self.work / "finetune" / task / name
        segments = interrupted_segments(run, asked)
        found = newest_complete_checkpoint(str(run), pattern=INTERVAL) if segments else None
        resume = Path(found) if found else None
        if resume is None:
            shutil.rmtree(run, ignore_errors=True)
            run.mkdir(parents=True)
            segments = []
        else:
            print(f"{task} {name}: continuing from {resume.name}", flush=True)
        data = self.work / "data" / task / "bin"
        options = dict(
            updates=u,
            warmup=max(1, round(WARMUP_SHARE * u)),
            batch=BATCH,
            validations=self.a.curve_points,
            log_interval=50,
            extra=["--max-epoch", math.ceil(self.a.epochs[task])],
            resumable=True,
        )
        start = self.minilm / "converted" / "model.pt"
        cmd = self.finetune_command(data, start, st, lr, seed, run, **options, resume_from=resume)
        from_update = int(INTERVAL.match(resume.name).group(1)) if resume else 0
        segment = {"started": time.time(), "from_update": from_update}
        write_json(run / PROGRESS, {"asked": asked, "segments": segments + [segment]})
        segment["cpu_seconds"] = self.sh(cmd, run / "train.log", append=resume is not None)
        segment["wall_seconds"] = round(time.time() - segment.pop("started"), 1)
        t0 = time.time()
        pred = self.predict_dev(run, data)
        from fairseq_ext.analysis.glue import METRICS, read_labels, score

        predictions = read_labels(pred)
        value = score(
            task, read_labels(self.work / "data" / task / "raw" / "valid.label"), predictions
        )
        segments.append(segment)
        cpu = [s["cpu_seconds"] for s in segments]
        result = {
            **asked,
            "name": name,
            "start": "minilm",
            "metric": METRICS[task],
            "dev": value,
            "epochs": self.a.epochs[task],
            "wall_seconds": round(sum(s["wall_seconds"] for s in segments) + time.time() - t0, 1),
            "train_cpu_seconds": None if None in cpu else round(sum(cpu), 1),
            "hardware": f"{self.hardware()}",
            "command": self.command_record(
                self.finetune_command(data, start, st, lr, seed, run, **options)
            ),
            "segments": segments,
            "validations": last_per_update(validations(run / "train.log")),
            "predictions": predictions,
        }
        write_json(kept, result)
        shutil.rmtree(run)
        print(
            f"{task} {name}: {METRICS[task]} {value:.2f} ({result['wall_seconds']:.0f} s)",
            flush=True,
        )
        return result

    def hardware(self) -> str:
        from fairseq_ext.analysis.hardware import cpu_and_cores

        return f"{cpu_and_cores()}, torch threads {self.env['OMP_NUM_THREADS']}"

    def chosen_lr(self, task: str, grid: dict) -> str:
        return max(grid, key=lambda lr: grid[lr]["dev"])

    def run(self) -> None:
        a = self.a
        self.prepare()
        with ThreadPoolExecutor(a.jobs) as pool:
            for task in a.tasks:  # task by task, so that a partial table holds whole tasks first
                grid = dict(
                    zip(
                        a.lrs,
                        pool.map(
                            lambda lr, t=task: self.finetune_run(t, f"lr{lr}-s0", False, 0, lr),
                            a.lrs,
                        ),
                    )
                )
                lr = self.chosen_lr(task, grid)
                scores = ", ".join(f"{k}: {v['dev']:.2f}" for k, v in grid.items())
                print(f"{task}: learning rate {lr} chosen on dev ({scores})", flush=True)
                jobs = [
                    pool.submit(self.finetune_run, task, f"st{int(st)}-s{seed}", st, seed, lr)
                    for seed in a.seeds
                    for st in (False, True)
                ]
                for job in jobs:
                    job.result()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m reproduction.position_masking.glue_full",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--work", type=Path, default=ROOT / "work" / "glue_full", help="data and running runs"
    )
    p.add_argument(
        "--results", type=Path, default=RESULTS, help="one JSON per finished run (kept in git)"
    )
    p.add_argument(
        "--glue", help="folder with CoLA/ and SST-2/ (data_prep/glue.py --local); else downloaded"
    )
    p.add_argument(
        "--plugin-root",
        type=Path,
        help="import fairseq_ext from this folder instead of the checkout",
    )
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    p.add_argument(
        "--epochs",
        nargs="+",
        type=epochs_option,
        default=list(DEFAULT_EPOCHS.items()),
        help="TASK=EPOCHS (default CoLA=3 SST-2=1: SST-2's 67,349 sentences take 2,105 updates "
        "an epoch)",
    )
    p.add_argument("--lrs", nargs="+", default=list(LRS), help="the grid, chosen per task on dev")
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    p.add_argument("--curve-points", type=int, default=6, help="dev validations per run")
    p.add_argument("--jobs", type=int, default=1, help="runs at a time, one torch thread each")
    a = p.parse_args(argv)
    a.epochs = {**DEFAULT_EPOCHS, **dict(a.epochs)}
    FullBudget(a).run()


if __name__ == "__main__":
    main()

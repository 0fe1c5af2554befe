"""Table 3 on real GLUE fine-tuning: Wagner et al. 2020 ("Positional Masking for Language
Models") claim that position masking in pre-training improves fine-tuning (section 5, 5.1:
10% of positions masked is best) and that the enhanced dropout gradient (section 2.2,
``--attention-dropout-straight-through``) gives consistently better fine-tuning (section 5.2).
This driver measures both on CoLA and SST-2 (data_prep/glue.py) from all-MiniLM-L6-v2.

    python -m reproduction.position_masking.glue_run [--work work/glue] [--glue DIR] [--wikitext
    FILE]
        [--plugin-root DIR] [--jobs 2] [options below]

Steps, each resumable (a finished run keeps its ``result.json`` and is not run again):

1. MiniLM converted (``python -m fairseq_ext.convert from-transformers``); WikiText-2 through
   ``data_prep/wikitext2.sh --local``, split into WordPiece pieces (``data_prep/wordpiece.py``)
   and binarized with the converted ``dict.txt``; CoLA and SST-2 through ``data_prep/glue.py``
   (SST-2: ``--sst2-train`` training examples).
2. Continued pre-training (task ``position_masked_lm``, ``position_masked_roberta`` with the
   converted options) for each ``--probs`` value on the same tokens, token masks, seed and
   updates; validation (MLM and position accuracy) every fifth of the updates. ``--probe NAME
   OPTIONS``: the last ``--probs`` value again for ``--probe-updates`` updates with OPTIONS
   appended to its fairseq-train command (e.g. a learning rate, the position loss weight, or
   ``--position-keep-prob 1``: positions left visible, the control that tells whether the new
   head can learn at all), to find out what keeps the position head at chance; nothing
   fine-tunes them. ``--probes-only`` stops after the probes and the learning-rate choice, so
   that the pre-training settings can be chosen from them first.
3. Learning-rate choice, once: each ``--lrs`` value fine-tunes MiniLM as converted (ordinary
   dropout, seed 0, which is no evaluation seed) on each task; the best dev score on
   ``--select-task`` (SST-2: on CoLA MiniLM stays at the majority class, MCC 0, at every
   rate tried, which chooses nothing) gives the learning rate of every run of both tasks.
4. Fine-tuning (fairseq's ``sentence_prediction``, ``--report-mcc``) from MiniLM as converted
   and from each pre-training, with and without ``--attention-dropout-straight-through``, for
   each ``--seeds`` value, all for ``--updates`` updates; ``--curve-points`` validations (the
   curves; each costs a pass over dev); the last checkpoint's dev predictions are scored with
   scikit-learn (``python -m fairseq_ext.analysis.glue``) and the checkpoint deleted. Order: task by
   task (``--tasks``), the pre-trained starts (ordinary dropout, then straight-through) seed by
   seed, then MiniLM's own rows seed by seed, so a partial table has whole seeds of the rows the
   claims compare first.

``--plugin-root DIR``: import ``fairseq_ext`` from DIR (e.g. ``git archive HEAD fairseq_ext``
unpacked there) so that a checkout edited during the runs cannot change them.
``collect_glue.py`` turns WORK into the results file, figures and page.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fairseq_ext.analysis.hardware import cpu_and_cores
from reproduction.records import repository_path

ROOT = Path(__file__).resolve().parents[2]
TASKS = ("CoLA", "SST-2")
PROBES = (
    ("baseline", ""),
    ("positions-visible", "--position-keep-prob 1 --position-random-prob 0"),
    ("lr1e-3", "--lr 1e-3"),
    ("loss-weight5", "--position-loss-weight 5"),
)
VALID_LINE = re.compile(r"\| valid on 'valid' subset \|(.*)")


def validations(log: Path) -> list[dict]:
    """Every validation line of a fairseq train.log as {field: number}."""
    out = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        m = VALID_LINE.search(line)
        if not m:
            continue
        row = {}
        for part in m.group(1).split("|"):
            bits = part.split()
            if len(bits) == 2:
                try:
                    row[bits[0]] = float(bits[1])
                except ValueError:
                    pass
        out.append(row)
    return out


class Driver:
    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.work = a.work.resolve()
        self.env = dict(
            os.environ,
            PYTHONWARNINGS="ignore",
            OMP_NUM_THREADS="1",
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        )
        plugin = (a.plugin_root or ROOT).resolve()
        self.user_dir = str(plugin / "fairseq_ext")
        self.env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([str(plugin), str(ROOT)]))
        self.minilm = self.work / "minilm"
        self.lock = threading.Lock()

    def command_record(self, cmd: list) -> list[str]:
        """A command as a results file keeps it: paths (the user dir included) relative to the
        repository."""
        return [
            repository_path(c)
            if isinstance(c, Path) or (isinstance(c, str) and c.startswith(str(ROOT)))
            else str(c)
            for c in cmd
        ]

    def sh(self, cmd: list, log: Path | None = None, append: bool = False) -> float:
        """Runs ``cmd`` (output into ``log``, after what it holds when ``append``); returns the CPU
        seconds it used, which a run's record keeps beside its wall time (a paused or crowded
        run's wall time says little)."""
        cmd = [str(c) for c in cmd]
        with self.lock, open(self.work / "commands.txt", "a", encoding="utf-8") as f:
            f.write(" ".join(cmd) + "\n")
        out = open(log, "a" if append else "w", encoding="utf-8") if log else subprocess.DEVNULL
        try:
            proc = subprocess.Popen(
                cmd, env=self.env, stdout=out, stderr=subprocess.STDOUT if log else None, cwd=ROOT
            )
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
        finally:
            if log:
                out.close()
        if proc.returncode != 0:
            tail = log.read_text(errors="replace")[-2000:] if log else ""
            raise RuntimeError(f"{' '.join(cmd[:3])} ... failed ({proc.returncode})\n{tail}")
        return round(usage.ru_utime + usage.ru_stime, 1)

    # 1. data
    def prepare(self) -> None:
        a, w, py = self.a, self.work, sys.executable
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
        tok, dct = self.minilm / "all-MiniLM-L6-v2", self.minilm / "converted" / "dict.txt"
        if not (w / "pretrain_bin" / "valid.bin").is_file():
            local = ["--local", a.wikitext] if a.wikitext else []
            self.sh(
                ["bash", ROOT / "data_prep" / "wikitext2.sh", *local, "--out", w / "wikitext"],
                w / "wikitext.log",
            )
            (w / "wordpiece").mkdir(exist_ok=True)
            for split in ("train", "valid"):
                self.sh(
                    [
                        py,
                        ROOT / "data_prep" / "wordpiece.py",
                        "encode",
                        "--tokenizer",
                        tok,
                        "--input",
                        w / "wikitext" / "raw" / f"{split}.txt",
                        "--output",
                        w / "wordpiece" / f"{split}.txt",
                    ]
                )
            self.sh(
                [
                    "fairseq-preprocess",
                    "--only-source",
                    "--srcdict",
                    dct,
                    "--trainpref",
                    w / "wordpiece" / "train.txt",
                    "--validpref",
                    w / "wordpiece" / "valid.txt",
                    "--destdir",
                    w / "pretrain_bin",
                    "--workers",
                    "2",
                ],
                w / "preprocess.log",
            )
        for task in TASKS:
            if (w / "data" / task / "bin" / "label" / "valid.bin").is_file():
                continue
            limit = ["--train-limit", a.sst2_train] if task == "SST-2" else []
            local = ["--local", a.glue] if a.glue else []
            self.sh(
                [
                    py,
                    ROOT / "data_prep" / "glue.py",
                    "--task",
                    task,
                    *local,
                    "--tokenizer",
                    tok,
                    "--dict",
                    dct,
                    "--out",
                    w / "data" / task,
                    "--max-tokens",
                    a.tokens - 2,
                    *limit,
                ],
                w / f"glue-{task}.log",
            )

    def options(self) -> list[str]:
        return (self.minilm / "converted" / "options.txt").read_text().split()

    def finish(self, run: Path, cmd: list, seed: int, t0: float, extra: dict) -> None:
        hardware = f"{cpu_and_cores()}, torch threads {self.env['OMP_NUM_THREADS']}"
        result = {
            "command": self.command_record(cmd),
            "seed": seed,
            "wall_seconds": round(time.time() - t0, 1),
            "hardware": hardware,
            "validations": validations(run / "train.log"),
            **extra,
        }
        (run / "result.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")

    # 2. continued pre-training
    def pretrain(self, prob: str, lr: str, u: int, name: str, extra: list[str] = ()) -> None:
        a = self.a
        lr = extra[extra.index("--lr") + 1] if "--lr" in extra else lr  # a probe's own rate
        run = self.work / "pretrain" / name
        if (run / "result.json").is_file():
            done = json.loads((run / "result.json").read_text(encoding="utf-8"))
            asked = {"lr": float(lr), "updates": u, "extra_options": list(extra)}
            if any(
                done.get(k, [] if k == "extra_options" else None) != v for k, v in asked.items()
            ):
                raise SystemExit(
                    f"{run} was pre-trained with other settings than asked now ({asked}); "
                    "give another --work or remove that folder"
                )
            return
        run.mkdir(parents=True, exist_ok=True)
        cmd = [
            "fairseq-train",
            self.work / "pretrain_bin",
            "--user-dir",
            self.user_dir,
            "--task",
            "position_masked_lm",
            "--criterion",
            "position_masked_lm",
            "--arch",
            "position_masked_roberta",
            *self.options(),
            "--position-mask-prob",
            prob,
            "--position-loss-weight",
            a.position_loss_weight,
            "--tokens-per-sample",
            a.tokens,
            "--sample-break-mode",
            "none",
            "--finetune-from-model",
            self.minilm / "converted" / "model.pt",
            "--optimizer",
            "adam",
            "--adam-betas",
            "(0.9,0.98)",
            "--adam-eps",
            "1e-6",
            "--weight-decay",
            "0.01",
            "--clip-norm",
            "1.0",
            "--lr",
            lr,
            "--lr-scheduler",
            "polynomial_decay",
            "--warmup-updates",
            u // 16 + 1,
            "--total-num-update",
            u,
            "--max-update",
            u,
            "--batch-size",
            "16",
            "--validate-interval-updates",
            max(1, u // 5),
            "--save-interval-updates",
            "1000000000",
            "--no-epoch-checkpoints",
            "--no-save-optimizer-state",
            "--log-format",
            "simple",
            "--log-interval",
            "25",
            "--num-workers",
            "0",
            "--seed",
            "1",
            "--save-dir",
            run,
            *extra,
        ]
        t0 = time.time()
        self.sh(cmd, run / "train.log")
        (run / "checkpoint_best.pt").unlink(missing_ok=True)
        if name.startswith("probe-"):  # nothing starts from a probe
            (run / "checkpoint_last.pt").unlink(missing_ok=True)
        self.finish(
            run,
            cmd,
            1,
            t0,
            {
                "probability": float(prob),
                "lr": float(lr),
                "updates": u,
                "extra_options": list(extra),
                "tokens_per_sample": a.tokens,
                "chance_position_accuracy": 100.0 / a.tokens,
            },
        )

    # 3./4. fine-tuning
    def start_checkpoint(self, start: str) -> Path:
        if start == "minilm":
            return self.minilm / "converted" / "model.pt"
        return self.work / "pretrain" / start / "checkpoint_last.pt"

    def finetune_command(
        self,
        data: Path,
        start: Path,
        st: bool,
        lr: str,
        seed: int,
        run: Path,
        *,
        updates: int,
        warmup: int,
        batch,
        validations: int,
        log_interval: int,
        extra: list = (),
        resumable: bool = False,
        resume_from: Path | None = None,
    ) -> list:
        """fairseq-train of ``sentence_prediction`` from ``start``, with straight-through attention
        dropout when ``st``: the fine-tuning command of every GLUE run (``extra`` after the
        updates). ``resumable``: a checkpoint with the optimizer's state at every validation (the
        last two kept); ``resume_from``, one of them, continues that run where it was saved."""
        every = max(1, updates // validations)
        restore = (
            ["--restore-file", resume_from]
            if resume_from
            else [
                "--restore-file",
                start,
                "--reset-optimizer",
                "--reset-dataloader",
                "--reset-meters",
                "--reset-lr-scheduler",
            ]
        )
        saving = (
            [
                "--save-interval-updates",
                every,
                "--keep-interval-updates",
                "2",
                "--no-epoch-checkpoints",
            ]
            if resumable
            else [
                "--save-interval-updates",
                "1000000000",
                "--no-epoch-checkpoints",
                "--no-save-optimizer-state",
            ]
        )
        return [
            "fairseq-train",
            data,
            "--user-dir",
            self.user_dir,
            "--task",
            "sentence_prediction",
            "--num-classes",
            "2",
            "--init-token",
            "0",
            "--separator-token",
            "2",
            "--shorten-method",
            "truncate",
            "--arch",
            "position_masked_roberta",
            *self.options(),
            *(["--attention-dropout-straight-through"] if st else []),
            "--criterion",
            "sentence_prediction",
            "--report-mcc",
            *restore,
            "--optimizer",
            "adam",
            "--adam-betas",
            "(0.9,0.98)",
            "--adam-eps",
            "1e-6",
            "--weight-decay",
            "0.1",
            "--clip-norm",
            "0.0",
            "--lr",
            lr,
            "--lr-scheduler",
            "polynomial_decay",
            "--warmup-updates",
            warmup,
            "--total-num-update",
            updates,
            "--max-update",
            updates,
            *extra,
            "--batch-size",
            batch,
            "--validate-interval-updates",
            every,
            *saving,
            "--log-format",
            "simple",
            "--log-interval",
            log_interval,
            "--num-workers",
            "0",
            "--seed",
            seed,
            "--save-dir",
            run,
        ]

    def predict_dev(self, run: Path, data: Path) -> Path:
        """The last checkpoint's dev predictions (``python -m fairseq_ext.analysis.glue predict``),
        one label a line."""
        pred = run / "dev.predictions"
        self.sh(
            [
                sys.executable,
                "-m",
                "fairseq_ext.analysis.glue",
                "predict",
                "--checkpoint",
                run / "checkpoint_last.pt",
                "--data",
                data,
                "--output",
                pred,
            ],
            run / "predict.log",
        )
        return pred

    def finetune(self, run: Path, task: str, start: str, st: bool, seed: int, lr: str) -> None:
        a = self.a
        if (run / "result.json").is_file():
            return
        shutil.rmtree(run, ignore_errors=True)
        run.mkdir(parents=True)
        u, data = a.updates, self.work / "data" / task / "bin"
        cmd = self.finetune_command(
            data,
            self.start_checkpoint(start),
            st,
            lr,
            seed,
            run,
            updates=u,
            warmup=u // 10 + 1,
            batch=a.batch,
            validations=a.curve_points,
            log_interval=25,
        )
        t0 = time.time()
        self.sh(cmd, run / "train.log")
        pred = self.predict_dev(run, data)
        for ckpt in run.glob("checkpoint*.pt"):
            ckpt.unlink()
        from fairseq_ext.analysis.glue import METRICS, read_labels, score

        value = score(
            task, read_labels(self.work / "data" / task / "raw" / "valid.label"), read_labels(pred)
        )
        self.finish(
            run,
            cmd,
            seed,
            t0,
            {
                "task": task,
                "start": start,
                "straight_through": st,
                "lr": float(lr),
                "updates": u,
                "metric": METRICS[task],
                "dev": value,
                "predictions": repository_path(pred),
            },
        )
        print(f"{task} {start} st={int(st)} seed {seed}: {METRICS[task]} {value:.2f}", flush=True)

    def chosen_lr(self) -> str:
        task = self.a.select_task
        scores = {}
        for lr in self.a.lrs:
            result = json.loads(
                (self.work / "select" / task / f"lr{lr}" / "result.json").read_text()
            )
            scores[lr] = result["dev"]
        best = max(self.a.lrs, key=lambda lr: scores[lr])
        (self.work / "select" / "chosen.json").write_text(
            json.dumps({"task": task, "scores": scores, "chosen": best}) + "\n"
        )
        return best

    def run(self) -> None:
        a = self.a
        self.prepare()
        starts = ["minilm"] + [f"p{p}" for p in a.probs]
        with ThreadPoolExecutor(a.jobs) as pool:
            probes = [
                pool.submit(
                    self.pretrain,
                    a.probs[-1],
                    a.pretrain_lr,
                    a.probe_updates,
                    f"probe-{name}",
                    options.split(),
                )
                for name, options in a.probe
            ]
            sel = [
                pool.submit(
                    self.finetune, self.work / "select" / t / f"lr{lr}", t, "minilm", False, 0, lr
                )
                for t in dict.fromkeys([a.select_task, *a.tasks])
                for lr in a.lrs
            ]
            for f in [*sel, *probes]:
                f.result()
            lr = self.chosen_lr()
            if a.probes_only:
                return
            pre = {
                f"p{p}": pool.submit(self.pretrain, p, a.pretrain_lr, a.pretrain_updates, f"p{p}")
                for p in a.probs
            }
            jobs = []
            tiers = (
                [(s, st) for st in (False, True) for s in starts[1:]],
                [("minilm", False), ("minilm", True)],
            )
            for (
                task
            ) in a.tasks:  # per task: the pre-trained starts for every seed, then MiniLM's own rows
                for tier in tiers:
                    for seed in a.seeds:
                        for start, st in tier:

                            def job(task=task, start=start, st=st, seed=seed):
                                if start in pre:
                                    pre[start].result()
                                run = self.work / "finetune" / task / f"{start}-st{int(st)}-s{seed}"
                                self.finetune(run, task, start, st, seed, lr)

                            jobs.append(pool.submit(job))
            failed = 0
            for f in [*pre.values(), *jobs]:
                try:
                    f.result()
                except RuntimeError as e:
                    failed += 1
                    print(f"run failed: {e}", file=sys.stderr, flush=True)
        if failed:
            sys.exit(
                f"{failed} runs failed (logs under {self.work}); rerun the same command to resume"
            )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--work", type=Path, default=ROOT / "work" / "glue")
    p.add_argument(
        "--glue", help="folder with CoLA/ and SST-2/ (data_prep/glue.py --local); else downloaded"
    )
    p.add_argument(
        "--wikitext",
        help="WikiText-2 raw file or folder (data_prep/wikitext2.sh --local); else downloaded",
    )
    p.add_argument(
        "--plugin-root",
        type=Path,
        help="import fairseq_ext from this folder instead of the checkout",
    )
    p.add_argument("--probs", nargs="+", default=["0", "0.10"])
    p.add_argument("--pretrain-updates", type=int, default=1000)
    p.add_argument("--pretrain-lr", default="2e-4")
    p.add_argument("--position-loss-weight", default="1.0")
    p.add_argument(
        "--probe",
        nargs=2,
        action="append",
        metavar=("NAME", "OPTIONS"),
        help="also pre-train the last --probs value with these fairseq-train options appended "
        "(the position head's curve only; nothing fine-tunes it); default: "
        + "; ".join(f"{n} '{o}'" for n, o in PROBES),
    )
    p.add_argument("--probe-updates", type=int, default=400)
    p.add_argument(
        "--probes-only",
        action="store_true",
        help="stop after the probes and the learning-rate choice",
    )
    p.add_argument(
        "--tokens",
        type=int,
        default=64,
        help="pre-training tokens per sample; fine-tuning keeps "
        "the first TOKENS - 2 pieces of a sentence",
    )
    p.add_argument("--updates", type=int, default=240, help="fine-tuning updates, every run")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument(
        "--curve-points", type=int, default=3, help="validations per fine-tuning run (the curves)"
    )
    p.add_argument(
        "--lrs",
        nargs="+",
        default=["1e-4", "3e-4"],
        help="fine-tuning learning rates to choose from (tried on every task, chosen on "
        "--select-task)",
    )
    p.add_argument(
        "--select-task",
        default="SST-2",
        choices=TASKS,
        help="the task the learning rate is chosen on",
    )
    p.add_argument(
        "--tasks",
        nargs="+",
        default=["SST-2", "CoLA"],
        choices=TASKS,
        help="tasks to fine-tune on, in order of priority",
    )
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    p.add_argument("--sst2-train", type=int, default=8000)
    p.add_argument("--jobs", type=int, default=2)
    a = p.parse_args(argv)
    a.probe = a.probe or PROBES
    Driver(a).run()


if __name__ == "__main__":
    main()

"""Table 1 of HI-CMLM (Wang et al. 2021) at convergence on Multi30k En-De, and the deep-shallow
student it yields: every run trained until its validation BLEU stops improving, by the
reproduction's convergence discipline (``reproduction/convergence.py``, as the Gigaword 10k table).

    python -m reproduction.hi_cmlm.converge --multi30k DIR [--rows cmlm hi_cmlm student]
        [--seeds 1 2 3] [--chunk 500] [--patience 4] [--max-updates 20000]
        [--checkpoint-every 100] [--jobs 2] [--threads 1] [--work work/hi_cmlm_converge]
        [--kept reproduction/hi_cmlm/converged]
    python -m reproduction.hi_cmlm.converge --distilled BIN --ref VAL_DE [...]

DIR: Multi30k's train.{en,de}[.gz] and val.{en,de}[.gz]; encoded with the shipped quickstart
sentencepiece model and dictionary and distilled by the shipped teacher (beam 5) as
``multi30k.sh`` does (``data_prep/multi30k.sh``, ``data_prep/distill.sh``). ``--distilled BIN``
takes such a folder made before (``work/hi_cmlm_multi30k/distill/bin``), ``--ref`` its raw German
val.

Rows, each with the settings of today's 600-update Table 1 (``multi30k.sh``): 3+3 x 192, encoder
initialised from the teacher (``--teacher``), 4096 tokens per batch, lr 1e-3, dropout 0.1,
label smoothing 0.1, seeds 1 2 3 (the same seed hence the same initial weights in every row):

- ``cmlm``: fairseq's ``cmlm_transformer``, warm-up 300;
- ``hi_cmlm``: HI-CMLM trained as the paper trains it (section 3.3: a random half of the masked
  slots gets the copied source), validated with Fence Replace, its best checkpoint decoded with
  each of the four strategies; warm-up 300;
- ``student``: the shipped layout, a deep-shallow 3+1 HI-CMLM (Kasai et al. 2021: the teacher's
  3 encoder layers under 1 decoder layer) trained as
  ``examples/quickstart/pretrain.sh --stage student --student-layers 3 1`` (warm-up 1000),
  validated (offset 0) on val outside the shipped test sample (val lines 201-700); its
  ``--length-offset`` chosen on those lines from ``--offsets`` with the best checkpoint; the
  sample scored once.

Protocol: chunks of ``--chunk`` updates (fairseq-train resumed from ``checkpoint_last.pt``, a
checkpoint every ``--checkpoint-every`` updates); after each, mask-predict on val (10 passes,
length beam 5) scored with sacreBLEU; the best checkpoint kept; a run stops when BLEU has not
improved for ``--patience`` validations (fixed before the runs), or at ``--max-updates`` and is
then marked not converged. The best checkpoint is decoded at the end with every pass kept (BLEU
after passes 1/2/4/10, Figure 2; by reference length, Table 2). Each finished run is one JSON
``KEPT/ROW-sSEED.json`` with its hypotheses in ``KEPT/hypotheses/``, both committed; a kept run is
not run again, a kept run or started work folder with other settings is refused before any run
starts, a run killed mid-way resumes from ``WORK/runs/ROW-sSEED``, and a run stopped at the cap
trains on when the cap is raised. At the end ``collect_converged`` writes ``KEPT/results.json``
and the section "Table 1 at convergence" of docs/results/hi-cmlm.md.

Cost on the project's 2-core CPU, one torch thread per run (measured: 600 updates in about 600 s,
a validation decode of val in 150-200 s): a chunk of 500 updates with its validation is about 11
minutes of one core; a run whose best is at update B takes B/500 + patience chunks, 2.3 to 3.8
core-hours for B from 4000 to 8000; the 9 runs with their final decodes 22 to 35 core-hours, 11 to
18 hours with ``--jobs 2``; a run the cap of 20000 updates stops takes 7.5 core-hours.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from reproduction import convergence
from reproduction.convergence import (
    RunClock,
    fairseq_generate,
    fairseq_train,
    read_lines,
    refusal,
    rel,
    same_run,
    sha256,
)
from reproduction.hi_cmlm.length_offset import SAMPLE_LINES
from reproduction.records import ROOT, write_json

KEPT = ROOT / "reproduction" / "hi_cmlm" / "converged"
MODEL_DIR = ROOT / "examples" / "quickstart" / "model"
STRATEGIES = ["all_mask", "all_copied", "weighted_sum", "fence_replace"]
PASSES, LENGTH_BEAM = 10, 5
TINY = (
    "--encoder-layers 3 --decoder-layers 3 --encoder-embed-dim 192 --decoder-embed-dim 192 "
    "--encoder-ffn-embed-dim 768 --decoder-ffn-embed-dim 768 --encoder-attention-heads 4 "
    "--decoder-attention-heads 4"
)
HYBRID = ["--hybrid-strategy", "fence_replace", "--train-decoder-input", "paper"]
ROWS = {
    "cmlm": {
        "label": "CMLM (fairseq cmlm_transformer)",
        "model": ["--arch", "cmlm_transformer"],
        "warmup": 300,
        "decodings": ["cmlm"],
    },
    "hi_cmlm": {
        "label": "HI-CMLM (paper's training, section 3.3)",
        "model": ["--arch", "hi_cmlm_transformer_tiny", *HYBRID, "--train-copy-share", "0.5"],
        "warmup": 300,
        "decodings": STRATEGIES,
    },
    "student": {
        "label": "deep-shallow 3+1 student (HI-CMLM, Fence Replace)",
        "model": ["--arch", "hi_cmlm_transformer_tiny", *HYBRID, "--train-copy-share", "0.5"],
        "layers": ["--decoder-layers", "1"],  # under the encoder of the teacher it starts from
        "warmup": 1000,
        "decodings": ["fence_replace"],
    },
}
SCORE = "bleu"


def row_key(row: str, decoding: str) -> str:
    """The key of a decoding in collect_results' tables (``cmlm``, ``hi_cmlm-fence_replace``)."""
    return row if decoding == "cmlm" else f"{row}-{decoding}"


def held_out(n: int) -> tuple[list[int], list[int]]:
    """The val lines a student is validated on (outside the shipped test sample) and the
    sample's lines, of a val set of ``n`` lines."""
    sample = [i for i in range(n) if i in SAMPLE_LINES]
    return [i for i in range(n) if i not in SAMPLE_LINES], sample


def bleu(hyps: list[str], refs: list[str], lines: list[int] | None = None) -> float:
    import sacrebleu

    if lines is not None:
        hyps, refs = [hyps[i] for i in lines], [refs[i] for i in lines]
    return round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2)


class Driver:
    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.work, self.kept = a.work.resolve(), a.kept.resolve()
        self.user_dir = ROOT / "fairseq_ext"
        self.env = dict(
            os.environ,
            PYTHONWARNINGS="ignore",
            OMP_NUM_THREADS=str(a.threads),
            MKL_NUM_THREADS=str(a.threads),
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            PYTHONPATH=os.pathsep.join(
                dict.fromkeys([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
            ),
        )

    # data
    def prepare(self) -> None:
        """Multi30k encoded with the quickstart model and distilled by the teacher, as
        multi30k.sh prepares it (kept under WORK and not redone); or --distilled as given."""
        a = self.a
        if a.distilled:
            return
        data, script = self.work / "data", ROOT / "data_prep"
        env = {
            **self.env,
            "SPM_MODEL": str(MODEL_DIR / "spm.model"),
            "SRCDICT": str(MODEL_DIR / "dict.txt"),
        }
        steps = [[script / "distill.sh", "--data", data / "bin", "--out", self.work / "distill"]]
        steps[0] += ["--teacher", a.teacher]  # distill.sh keeps what it finished
        if not (data / "bin" / "dict.en.txt").is_file():
            steps.insert(0, [script / "multi30k.sh", "--local", a.multi30k, "--out", data])
        data.mkdir(parents=True, exist_ok=True)
        for cmd in steps:
            with open(self.work / "prepare.log", "a", encoding="utf-8") as log:
                proc = subprocess.run(
                    ["bash", *map(str, cmd)], env=env, stdout=log, stderr=log, cwd=ROOT
                )
            if proc.returncode != 0:
                raise SystemExit(f"{cmd[0].name} failed; see {self.work / 'prepare.log'}")
        a.distilled, a.ref = self.work / "distill" / "bin", data / "raw" / "val.de"

    def settings(self, row: str) -> dict:
        """What a kept run of ``row`` must share with this call to count as the same run."""
        a, spec = self.a, ROWS[row]
        out = {
            "chunk": a.chunk,
            "patience": a.patience,
            "max_updates": a.max_updates,
            "passes": PASSES,
            "length_beam": LENGTH_BEAM,
            "dims": a.dims,
            "max_tokens": a.max_tokens,
            "lr": a.lr,
            "warmup": spec["warmup"],
            "teacher_sha256": self.teacher_sha,
            "train_targets_sha256": self.targets_sha,
        }
        if row == "student":
            out["offsets"] = a.offsets
        return out

    def train_command(self, row: str, seed: int, save_dir: Path) -> list:
        a, spec = self.a, ROWS[row]
        dims = (a.dims or (TINY if row == "cmlm" else "")).split()
        return [
            a.distilled,
            "--user-dir",
            self.user_dir,
            "-s",
            "en",
            "-t",
            "de",
            "--task",
            "cmlm_hybrid",
            "--noise",
            "random_mask",
            *spec["model"],
            "--init-encoder-from",
            a.teacher,
            *dims,
            *spec.get("layers", []),
            "--criterion",
            "nat_loss",
            "--label-smoothing",
            "0.1",
            "--optimizer",
            "adam",
            "--adam-betas",
            "(0.9,0.98)",
            "--lr",
            a.lr,
            "--lr-scheduler",
            "inverse_sqrt",
            "--warmup-updates",
            spec["warmup"],
            "--warmup-init-lr",
            "1e-7",
            "--clip-norm",
            "1.0",
            "--dropout",
            "0.1",
            "--max-tokens",
            a.max_tokens,
            "--max-epoch",
            "100000",
            "--seed",
            seed,
            "--disable-validation",
            "--no-epoch-checkpoints",
            "--save-interval-updates",
            a.checkpoint_every,
            "--keep-interval-updates",
            "1",
            "--log-format",
            "simple",
            "--log-interval",
            "100",
            "--num-workers",
            "0",
            "--save-dir",
            save_dir,
        ]

    def generate_command(self, ckpt: Path, decoding: str, offset: int = 0) -> list:
        strategy = (
            []
            if decoding == "cmlm"
            else ["--model-overrides", f"{{'hybrid_strategy': '{decoding}'}}"]
        )
        return [
            self.a.distilled,
            "--user-dir",
            self.user_dir,
            "--task",
            "cmlm_hybrid",
            "-s",
            "en",
            "-t",
            "de",
            "--path",
            ckpt,
            "--gen-subset",
            "valid",
            *strategy,
            *(["--length-offset", offset] if offset else []),
            "--iter-decode-max-iter",
            PASSES - 1,
            "--iter-decode-with-beam",
            LENGTH_BEAM,
            "--iter-decode-force-max-iter",
            "--retain-iter-history",
            "--batch-size",
            "64",
            "--post-process",
            "sentencepiece",
            "--num-workers",
            "0",
        ]

    def decode(self, ckpt: Path, decoding: str, out: Path, offset: int = 0) -> list[str]:
        """Mask-predict on val into ``out`` (generate.txt with every pass, hyp.txt, seconds)."""
        t0 = time.time()
        hyps = fairseq_generate(self.generate_command(ckpt, decoding, offset), out / "generate")
        if len(hyps) != len(self.refs):
            raise RuntimeError(f"{len(hyps)} hypotheses for the {len(self.refs)} val sentences")
        (out / "generate" / "generate-valid.txt").replace(out / "generate.txt")
        (out / "hyp.txt").write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
        (out / "seconds").write_text(f"{round(time.time() - t0)}\n")
        return hyps

    def hardware(self) -> str:
        from fairseq_ext.analysis.hardware import cpu_and_cores

        return f"{cpu_and_cores()}, torch threads {self.a.threads}"

    # one run
    def run_one(self, row: str, seed: int) -> dict:
        a, name = self.a, f"{row}-s{seed}"
        kept, w = self.kept / f"{name}.json", self.work / "runs" / name
        asked, state_file = self.settings(row), self.work / "runs" / name / "state.json"
        if kept.is_file():
            done = json.loads(kept.read_text(encoding="utf-8"))
            if same_run(done, asked):
                return done
        w.mkdir(parents=True, exist_ok=True)
        state = convergence.load_state(state_file, asked, final={})
        if state["settings"] != asked:  # a capped run asked with a higher cap (refusal checked)
            state.update(
                settings=asked,
                final={},
                extended_from=[*state.get("extended_from", []), state["settings"]["max_updates"]],
            )
        save_dir, best = w / "checkpoints", w / "best.pt"
        clock = RunClock(state_file, save_dir / "checkpoint_last.pt", state, self.hardware())
        clock.save()
        train = self.train_command(row, seed, save_dir)
        validate_with = ROWS[row]["decodings"][-1]  # fence_replace, or CMLM's own
        lines = held_out(len(self.refs))[0] if row == "student" else None

        def validate(checkpoint: Path) -> dict:
            return {
                SCORE: bleu(self.decode(checkpoint, validate_with, w / "valid"), self.refs, lines)
            }

        convergence.train_in_chunks(
            name,
            state,
            clock,
            save_dir,
            best,
            train=lambda target: fairseq_train(train + ["--max-update", target]),
            validate=validate,
            key=SCORE,
            label="BLEU",
            chunk=a.chunk,
            max_updates=a.max_updates,
            patience=a.patience,
        )
        curve = state["curve"]
        chosen = curve[convergence.best_index(curve, SCORE)]
        stopped = convergence.stopped(curve, a.patience, SCORE)
        record = {
            "row": row,
            "label": ROWS[row]["label"],
            "seed": seed,
            "settings": asked,
            "command": "fairseq-train "
            + " ".join(rel(c) if isinstance(c, Path) else str(c) for c in train)
            + " --max-update UPDATES",
            "curve": curve,
            "stopped": stopped,
            "chosen_update": chosen["update"],
            **(self.student_offset(w, best, state, clock) if row == "student" else {}),
            "decodings": self.final_decodings(row, seed, w, best, state, clock),
        }
        record.update(
            wall_seconds=clock.seconds(),
            sessions=state["sessions"],
            hardware=clock.machines(),
            batches_per_epoch_from=state.get("batches_per_epoch_from"),
            **({"extended_from_caps": state["extended_from"]} if "extended_from" in state else {}),
        )
        write_json(kept, record)
        if stopped == convergence.EARLY_STOPPED:  # a capped run keeps its checkpoints
            shutil.rmtree(w)
        print(f"{name}: stopped ({stopped}), best update {chosen['update']}", flush=True)
        return record

    def student_offset(self, w: Path, best: Path, state: dict, clock: RunClock) -> dict:
        """The student's --length-offset: the best BLEU on val outside the shipped test sample
        (ties: the smallest offset); the sample scored once, with that offset."""
        grid = state["final"].setdefault("offset_grid", {})
        valid, sample = held_out(len(self.refs))
        for offset in self.a.offsets:
            if str(offset) not in grid:
                hyps = self.decode(best, "fence_replace", w / f"offset{offset}", offset)
                grid[str(offset)] = {"bleu": bleu(hyps, self.refs, valid)}
                clock.save()
        chosen = max(self.a.offsets, key=lambda o: (grid[str(o)]["bleu"], -o))
        state["final"]["chosen_length_offset"] = chosen
        hyps = read_lines(w / f"offset{chosen}" / "hyp.txt")
        return {
            "length_offset_grid": grid,
            "chosen_length_offset": chosen,
            "valid_outside_sample": {"sentences": len(valid), "bleu": grid[str(chosen)]["bleu"]},
            "test_sample": {"sentences": len(sample), "bleu": bleu(hyps, self.refs, sample)}
            if sample
            else None,
        }

    def final_decodings(
        self, row: str, seed: int, w: Path, best: Path, state: dict, clock: RunClock
    ) -> dict:
        """The best checkpoint decoded with each of the row's decodings (the student: its decode
        with the chosen offset), every pass kept, scored as collect_results scores Table 1."""
        import sacrebleu

        from reproduction.hi_cmlm.collect_results import decoding_results

        offset = state["final"].get("chosen_length_offset", 0)
        out = {}
        for decoding in ROWS[row]["decodings"]:
            key = row_key(row, decoding)
            if key not in state["final"]:
                dec = w / (f"offset{offset}" if row == "student" else f"decode-{decoding}")
                if row != "student":
                    self.decode(best, decoding, dec)
                score = sacrebleu.BLEU()
                hyps = read_lines(dec / "hyp.txt")
                write_json(
                    dec / "bleu.json",
                    {
                        "score": score.corpus_score(hyps, [self.refs]).score,
                        "signature": str(score.get_signature()),
                    },
                )
                result = decoding_results(w, dec, self.refs, ROOT)
                hyp_file = self.kept / "hypotheses" / f"{key}-seed{seed}.txt"
                hyp_file.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(dec / "hyp.txt", hyp_file)
                command = self.generate_command(best, decoding, offset)
                result.update(
                    hypotheses=rel(hyp_file),
                    updates=state["curve"][convergence.best_index(state["curve"], SCORE)]["update"],
                    train_seconds=round(sum(c["train_seconds"] for c in state["curve"]), 1),
                    generate="fairseq-generate "
                    + " ".join(rel(c) if isinstance(c, Path) else str(c) for c in command),
                )
                state["final"][key] = result
                clock.save()
            out[key] = state["final"][key]
        return out

    # workers: one process per run (its own log and torch threads); fairseq runs inside it
    def worker(self, row: str, seed: int) -> None:
        if self.a.in_process:
            self.run_worker(row, seed)
            return
        spec = self.work / "specs" / f"{row}-s{seed}.json"
        write_json(spec, {"row": row, "seed": seed, "argv": self.argv})
        log = self.work / "runs" / f"{row}-s{seed}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a", encoding="utf-8") as out:
            proc = subprocess.run(
                [sys.executable, "-m", "reproduction.hi_cmlm.converge", "--worker", str(spec)],
                env=self.env,
                stdout=out,
                stderr=out,
                cwd=ROOT,
            )
        if proc.returncode != 0:
            raise RuntimeError(f"{row}-s{seed} failed ({proc.returncode}); see {log}")

    def run_worker(self, row: str, seed: int) -> None:
        import torch

        torch.set_num_threads(self.a.threads)
        self.run_one(row, seed)

    def load(self) -> None:
        """The facts every run's settings name: the teacher and the distilled training targets."""
        self.teacher_sha = sha256(self.a.teacher)
        self.targets_sha = sha256(self.a.distilled / "train.en-de.de.bin")
        self.refs = read_lines(self.a.ref)

    def run(self) -> None:
        a = self.a
        self.work.mkdir(parents=True, exist_ok=True)
        self.prepare()
        self.load()
        self.argv = argv_absolute(a)
        todo = [(r, s) for s in a.seeds for r in a.rows]  # seed by seed: whole seeds first
        refused = [
            why
            for r, s in todo
            if (
                why := refusal(
                    self.kept / f"{r}-s{s}.json",
                    self.work / "runs" / f"{r}-s{s}" / "state.json",
                    self.settings(r),
                )
            )
        ]
        if refused:  # before any run starts, not hours later when the pool reaches the refused one
            raise SystemExit("\n".join(refused))

        def one(job):
            row, seed = job
            kept = self.kept / f"{row}-s{seed}.json"
            if kept.is_file() and same_run(
                json.loads(kept.read_text(encoding="utf-8")), self.settings(row)
            ):
                print(f"kept: {row}-s{seed}", flush=True)
                return
            self.worker(row, seed)

        with ThreadPoolExecutor(a.jobs) as pool:
            for job in [pool.submit(one, j) for j in todo]:
                job.result()
        from reproduction.hi_cmlm import collect_converged

        collect_converged.main(
            ["--kept", str(self.kept), "--ref", str(a.ref), "--page", str(a.page)]
        )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m reproduction.hi_cmlm.converge",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--multi30k", type=Path, help="folder of Multi30k's train and val files")
    p.add_argument("--distilled", type=Path, help="a distilled binarized folder made before")
    p.add_argument("--ref", type=Path, help="with --distilled: the raw German val references")
    p.add_argument("--teacher", type=Path, default=MODEL_DIR / "teacher.pt")
    p.add_argument("--work", type=Path, default=ROOT / "work" / "hi_cmlm_converge")
    p.add_argument("--kept", type=Path, default=KEPT, help="one JSON per finished run (committed)")
    p.add_argument("--page", type=Path, default=ROOT / "docs" / "results" / "hi-cmlm.md")
    p.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    p.add_argument("--chunk", type=int, default=500, help="updates between two validations")
    p.add_argument(
        "--patience", type=int, default=4, help="validations without a better BLEU before stopping"
    )
    p.add_argument(
        "--max-updates", type=int, default=20000, help="a cap; a run it stops is not converged"
    )
    p.add_argument("--checkpoint-every", type=int, default=100, help="checkpoints within a chunk")
    p.add_argument("--offsets", nargs="+", type=int, default=[-1, 0, 1, 2, 3, 4])
    p.add_argument("--max-tokens", type=int, default=4096)
    p.add_argument("--lr", default="1e-3")
    p.add_argument("--dims", default="", help="model size options replacing the rows' own (tests)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per run")
    p.add_argument("--jobs", type=int, default=2, help="runs side by side")
    p.add_argument("--in-process", action="store_true", help="every run in this process (tests)")
    p.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = parser()
    a = p.parse_args(argv)
    if a.worker:
        spec = json.loads(a.worker.read_text(encoding="utf-8"))
        d = Driver(p.parse_args(spec["argv"]))
        d.load()
        d.run_worker(spec["row"], spec["seed"])
        return
    if bool(a.multi30k) == bool(a.distilled) or bool(a.distilled) != bool(a.ref):
        p.error("give --multi30k DIR, or --distilled BIN with --ref VAL_DE")
    for path in filter(None, [a.ref, a.teacher, a.distilled and a.distilled / "dict.de.txt"]):
        if not path.is_file():
            p.error(f"{path} does not exist")
    if a.multi30k and not a.multi30k.is_dir():
        p.error(f"--multi30k {a.multi30k} is not a folder")
    if a.patience < 2 or a.chunk < 1 or a.max_updates < a.chunk or a.jobs < 1 or a.threads < 1:
        p.error(
            "--patience must be >= 2, --chunk >= 1, --max-updates >= --chunk, --jobs and "
            "--threads >= 1"
        )
    if a.in_process and a.jobs > 1:
        p.error("--in-process runs one run at a time: give --jobs 1")
    for name in ("multi30k", "distilled", "ref", "teacher", "work", "kept", "page"):
        if getattr(a, name):
            setattr(a, name, getattr(a, name).resolve())
    Driver(a).run()


def argv_absolute(a: argparse.Namespace) -> list[str]:
    """This call's options with absolute paths and the prepared data, for the workers."""
    out = []
    for action in parser()._actions:
        value = getattr(a, action.dest, None)
        if action.dest in ("help", "worker", "multi30k") or value in (None, False):
            continue
        flag = action.option_strings[0]
        if value is True:
            out.append(flag)
        elif isinstance(value, list):
            out += [flag, *map(str, value)]
        else:
            out.append(f"{flag}={value}")
    return out


if __name__ == "__main__":
    main()

"""How much work one mask-predict decoding of the shipped student does beside its
autoregressive teacher's beam search, counted rather than timed (issue 41), so that it holds on
any machine, loaded or not.

Mask-predict (Ghazvininejad et al. 2019, section 3) runs the whole decoder over every target
slot in each of its T passes; the teacher runs it over one new slot per step and hypothesis.
Two counts bound what any implementation of the same computation can gain on a CPU:

* floating-point operations (``torch.utils.flop_counter.FlopCounterMode``: every matrix
  product, 2 per multiply-add), what a compute-bound decoding (large batches) pays;
* ATen operators dispatched (a ``TorchDispatchMode`` that counts each call), what a
  dispatch-bound decoding (batch 1, where each small operator costs about the same fixed
  overhead) pays.

For each batch size and setting, on the first sentences of the shipped Multi30k test sample,
both sides decode the same sentences, each in the input format of its own task (``own_inputs``:
``fairseq-preprocess`` data read back by the checkpoint's task; the teacher's ``translation``
has no ``<s>`` in front of the source, the student's ``cmlm_hybrid`` has): the teacher with
fairseq's ``SequenceGenerator`` (beam 1 and 5), the student with the plugin's mask-predict
generator (length beam 1, T = 1, 4, 10 passes, ``--iter-decode-force-max-iter``). The teacher's
count over the student's is the speed-up that side would reach if time were proportional to that
count; a measured speed-up above it means the student's operators run faster per count than the
teacher's.

    python -m reproduction.benchmarks.maskpredict_work [--student CKPT] [--out FILE]

counts the shipped student (or ``--student``, another student of the quickstart's dictionary,
e.g. one shipped before) and keeps its counts in
``reproduction/benchmarks/results/maskpredict_work.json`` beside those of the other students
counted (one entry per student, by SHA-256), then writes the ``maskpredict-work`` block of
docs/results/speed.md (``--render`` redraws the block from the file alone).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from argparse import Namespace
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from reproduction.benchmarks import common, hicmlm, own_inputs
from reproduction.records import repository_path, write_json
from reproduction.results_page import write_between_markers

RESULTS = common.ROOT / "reproduction" / "benchmarks" / "results" / "maskpredict_work.json"
PAGE = common.ROOT / "docs" / "results" / "speed.md"
START, END = "<!-- maskpredict-work:start -->", "<!-- maskpredict-work:end -->"
# batch size -> sentences decoded (whole batches)
SETTINGS = {1: 20, 64: 128}
TEACHER_BEAMS = (1, 5)
PASSES = (1, 4, 10)
COMMAND = "python -m reproduction.benchmarks.maskpredict_work"
# what a count's record says of its inputs; counts made before it gave the teacher the student's
# format
INPUTS = "each model's own task's input (own_inputs)"


class OperatorCount(TorchDispatchMode):
    """Counts every ATen operator dispatched while it is active."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


def count_work(fn) -> dict:
    """FLOPs and ATen operators of one call of ``fn()`` (two calls: the counters do not nest)."""
    flops = FlopCounterMode(display=False)
    with flops:
        fn()
    ops = OperatorCount()
    with ops:
        fn()
    return {"flops": flops.get_total_flops(), "operators": ops.count}


def measure(student_path: Path = hicmlm.STUDENT) -> dict:
    common.load_plugin()
    rows = []
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory(prefix="fairseq_ext_work_") as tmp, torch.no_grad():
        data = own_inputs.binarise_sample(max(SETTINGS.values()), Path(tmp))
        student = own_inputs.load(student_path, data)
        teacher = own_inputs.load(hicmlm.TEACHER, data)
        for batch_size, sentences in SETTINGS.items():
            sides = {
                f"teacher beam {beam}": (teacher, Namespace(beam=beam, max_len_a=1.2, max_len_b=10))
                for beam in TEACHER_BEAMS
            }
            sides.update(
                {
                    f"student T={T}": (
                        student,
                        Namespace(
                            iter_decode_max_iter=T - 1,
                            iter_decode_with_beam=1,
                            iter_decode_force_max_iter=True,
                        ),
                    )
                    for T in PASSES
                }
            )
            for side, ((model, task, sources), options) in sides.items():
                generator = task.build_generator([model], options)
                batches = own_inputs.batches(task, sources[:sentences], batch_size)
                work = count_work(lambda: [generator.generate([model], b) for b in batches])
                rows.append(
                    {
                        "batch": batch_size,
                        "sentences": sentences,
                        "side": side,
                        "flops_per_sentence": work["flops"] / sentences,
                        "operators_per_sentence": work["operators"] / sentences,
                    }
                )
    command = (
        COMMAND
        if student_path == hicmlm.STUDENT
        else f"{COMMAND} --student {repository_path(student_path)}"
    )
    return {
        "command": command,
        "date": time.strftime("%Y-%m-%d"),
        "torch": torch.__version__,
        "student_sha256": hicmlm.student_digest(student_path),
        "student_layout": hicmlm.student_layout(student[0]),
        "data": "examples/quickstart/data/test.en, the first sentences",
        "inputs": INPUTS,
        "rows": rows,
    }


def counted(student_path: Path, results: Path = RESULTS) -> dict:
    """The kept count of this student (by SHA-256) under this torch, on the models' own inputs,
    else a new one: counting takes a minute, and the same weights dispatch the same work."""
    digest = hicmlm.student_digest(student_path)
    runs = json.loads(results.read_text(encoding="utf-8"))["runs"] if results.exists() else []
    kept = [
        r
        for r in runs
        if r["student_sha256"] == digest
        and r["torch"] == torch.__version__
        and r.get("inputs") == INPUTS
    ]
    return kept[0] if kept else measure(student_path)


def bounds(record: dict) -> list[dict]:
    """Per batch size and pass count: the teacher's (beam 5) count over the student's, for FLOPs
    and for operators."""
    rows = {(r["batch"], r["side"]): r for r in record["rows"]}
    out = []
    for batch in sorted({r["batch"] for r in record["rows"]}):
        teacher = rows[(batch, "teacher beam 5")]
        for T in PASSES:
            student = rows.get((batch, f"student T={T}"))
            if student:
                out.append(
                    {
                        "batch": batch,
                        "passes": T,
                        "flops": teacher["flops_per_sentence"] / student["flops_per_sentence"],
                        "operators": teacher["operators_per_sentence"]
                        / student["operators_per_sentence"],
                    }
                )
    return out


def render(
    runs: list[dict], measured: dict | None = None, measured_sha256: str | None = None
) -> str:
    """The block of docs/results/speed.md: each counted student's counts and bounds, beside the
    measured speed-ups of ``measured`` (``{(batch, passes): speed-up}``, ``bench_speedups``) for
    the student the bench timed (``measured_sha256``)."""
    lines = []
    for record in runs:
        timed = measured if measured_sha256 == record["student_sha256"] else {}
        lines += [
            f"Student {record['student_layout']} (SHA-256 {record['student_sha256'][:12]}...), "
            f"counted with `{record['command']}` ({record['date']}, torch {record['torch']}), on "
            f"{record['data']}.",
            "",
            "| batch | side | GFLOP per sentence | ATen operators per sentence |",
            "|---:|---|---:|---:|",
        ]
        for r in record["rows"]:
            lines.append(
                f"| {r['batch']} | {r['side']} | {r['flops_per_sentence'] / 1e9:.3f} | "
                f"{r['operators_per_sentence']:,.0f} |"
            )
        lines += [
            "",
            "| batch | passes | teacher (beam 5) / student, FLOPs | teacher / student, operators "
            "| measured speed-up (`make bench`) |",
            "|---:|---:|---:|---:|---:|",
        ]
        for b in bounds(record):
            speedup = (timed or {}).get((b["batch"], b["passes"]))
            shown = (
                f"{speedup:.2f}x"
                if speedup is not None
                else "not measured"
                if not measured or timed
                else "the bench timed another student"
            )
            lines.append(
                f"| {b['batch']} | {b['passes']} | {b['flops']:.2f}x | {b['operators']:.2f}x | "
                f"{shown} |"
            )
        lines.append("")
    return "\n".join(lines)


def bench_speedups() -> tuple[dict, str | None]:
    """``({(batch, passes): speed-up}, the student's SHA-256)`` of the published CPU bench's
    decoding rows with length beam 1 against the teacher's beam 5 (``make bench``,
    ``reproduction/benchmarks/hicmlm.py``)."""
    cpu = common.ROOT / "reproduction" / "benchmarks" / "results" / "cpu.json"
    if not cpu.exists():
        return {}, None
    details = json.loads(cpu.read_text()).get("benchmarks", {}).get("hicmlm", {}).get("details", {})
    return (
        {
            (r["batch"], r["passes"]): r["speedup"]
            for r in details.get("decode_rows", [])
            if r["length_beam"] == 1 and r["teacher_beam"] == 5
        },
        details.get("student_sha256"),
    )


def keep(runs: list[dict], record: dict) -> list[dict]:
    """``runs`` with ``record`` in place of an earlier count of the same student."""
    return [r for r in runs if r["student_sha256"] != record["student_sha256"]] + [record]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog=COMMAND, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--student",
        type=Path,
        default=hicmlm.STUDENT,
        help="student checkpoint (default: the shipped one)",
    )
    p.add_argument("--out", type=Path, default=RESULTS, help="results file (default: %(default)s)")
    p.add_argument(
        "--render", action="store_true", help="only redraw the page's block from the results file"
    )
    args = p.parse_args(argv)
    if not args.student.is_file():
        p.error(f"--student {args.student}: no such checkpoint")
    runs = json.loads(args.out.read_text(encoding="utf-8"))["runs"] if args.out.exists() else []
    if not args.render:
        runs = keep(runs, measure(args.student))
        write_json(args.out, {"runs": runs})
    block = render(runs, *bench_speedups())
    if args.out.resolve() == RESULTS.resolve():
        write_between_markers(PAGE, block, START, END)
    print(block, end="")


if __name__ == "__main__":
    main()

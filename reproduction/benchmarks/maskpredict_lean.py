"""The lean mask-predict loop against the reference path (issue 76, item 3), side by side in one
process on one thread, on the shipped student and the first sentences of the shipped test sample
in the student's own input format (``own_inputs``).

Three sides decode each setting ``(passes, length beam, --length-offset)`` of ``SETTINGS`` with
adaptive termination (``fairseq-generate``'s default):

* ``lean``: ``cmlm_hybrid``'s generator as ``fairseq-generate`` builds it, which decodes with
  ``fairseq_ext.generation.lean_mask_predict``;
* ``generic``: the same generator with ``lean=False``: fairseq's ``IterativeRefinementGenerator``
  over fairseq's CMLM pass with the plugin's fixes (``fairseq_ext/generation/refinement.py``),
  the path of a decoder the lean loop does not serve; the committed results were measured with
  the generic loop it replaced (issue 84);
* ``fairseq``: fairseq's own ``IterativeRefinementGenerator`` over the same pass: upstream as it
  is, its adaptive stop included (which can keep masked slots).

Speeds are sentences/s at batch 1 and 64 (``SENTENCES``), the median of ``--rounds``
interleaved rounds (``common.interleaved_medians``) after a warm-up, with the sacreBLEU of the
very outputs timed, the share of sentences whose lean hypothesis equals the generic one token for
token, and the load average (``uptime``) around each measurement: other jobs may share the
cores, so the ratios, measured in the same rounds, are what to read.

    OMP_NUM_THREADS=1 python -m reproduction.benchmarks.maskpredict_lean [--rounds 3] [--out FILE]

writes ``reproduction/benchmarks/results/maskpredict_lean.json``.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import tempfile
import time
from argparse import Namespace
from pathlib import Path

import torch

from reproduction.benchmarks import common, own_inputs
from reproduction.benchmarks.frontier import bleu, setting_name
from reproduction.benchmarks.hicmlm import student_digest
from reproduction.records import repository_path, write_json

RESULTS = common.ROOT / "reproduction" / "benchmarks" / "results" / "maskpredict_lean.json"
COMMAND = "OMP_NUM_THREADS=1 python -m reproduction.benchmarks.maskpredict_lean"
STUDENT = own_inputs.MODEL_DIR / "checkpoint.pt"
SETTINGS = [(4, 1, 0), (10, 1, 0), (10, 3, 2)]  # passes, length beam, --length-offset
SENTENCES = {1: 100, 64: 256}  # batch size -> sentences decoded
SIDES = ("lean", "generic", "fairseq")


def uptime() -> str:
    """``uptime``'s line (the load averages over 1, 5 and 15 minutes)."""
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def _sides(model, task, passes: int, beam: int, offset: int) -> dict:
    """``{side: (generator, model)}`` for one setting (``SIDES``)."""
    from fairseq.iterative_refinement_generator import IterativeRefinementGenerator

    task.cfg.length_offset = offset
    args = Namespace(iter_decode_max_iter=passes - 1, iter_decode_with_beam=beam)
    lean = task.build_generator([model], args)
    assert lean.lean, "cmlm_hybrid did not choose the lean loop for the shipped student"
    generic = task.build_generator([model], args)
    generic.lean = False
    fairseq = IterativeRefinementGenerator(
        task.target_dictionary, max_iter=passes - 1, beam_size=beam
    )
    return {"lean": (lean, model), "generic": (generic, model), "fairseq": (fairseq, model)}


def _decode(generator, model, batches: list[dict]) -> list[torch.Tensor]:
    """The best hypothesis' tokens of every sentence, in line order."""
    pairs = [
        (int(i), hypos[0]["tokens"])
        for b in batches
        for i, hypos in zip(b["id"], generator.generate([model], b))
    ]
    return [t for _, t in sorted(pairs, key=lambda p: p[0])]


def measure(sentences: dict[int, int] = SENTENCES, settings=SETTINGS, rounds: int = 3) -> dict:
    logging.getLogger("fairseq").setLevel(logging.WARNING)
    common.load_plugin()
    torch.set_num_threads(1)
    sp, rows = own_inputs.sentencepiece(), []
    start = uptime()
    with tempfile.TemporaryDirectory(prefix="fairseq_ext_lean_") as tmp, torch.no_grad():
        data = own_inputs.binarise_sample(max(sentences.values()), Path(tmp))
        model, task, sources = own_inputs.load(STUDENT, data)
        d = task.target_dictionary
        for passes, beam, offset in settings:
            sides = _sides(model, task, passes, beam, offset)
            for bsz, n in sentences.items():
                batches = own_inputs.batches(task, sources[:n], bsz)
                refs = own_inputs.references(n)
                for generator, m in sides.values():  # warm-up
                    _decode(generator, m, batches[:4])
                outputs: dict = {}
                fns = {
                    side: (
                        lambda side=side, g=g, m=m: outputs.__setitem__(
                            side, _decode(g, m, batches)
                        )
                    )
                    for side, (g, m) in sides.items()
                }
                before, load_line = common.load_average(), uptime()
                secs = common.interleaved_medians(fns, reps=rounds, device="cpu", warmup=0)
                after = common.load_average()
                row = {
                    "setting": setting_name(passes, beam, offset),
                    "passes": passes,
                    "length_beam": beam,
                    "length_offset": offset,
                    "batch": bsz,
                    "sentences": n,
                    "sentences_per_s": {s: round(n / secs[s], 2) for s in SIDES},
                    "bleu": {
                        s: round(bleu([own_inputs.pieces(t, d) for t in outputs[s]], refs, sp), 2)
                        for s in SIDES
                    },
                    "identical_to_generic": sum(
                        torch.equal(a, b) for a, b in zip(outputs["lean"], outputs["generic"])
                    )
                    / n,
                    "lean_over_generic": round(secs["generic"] / secs["lean"], 3),
                    "lean_over_fairseq": round(secs["fairseq"] / secs["lean"], 3),
                    "load_before": round(before, 2),
                    "load_after": round(after, 2),
                    "uptime": load_line,
                    "note": common.load_note(before, after, "cpu"),
                }
                rows.append(row)
                print(
                    f"maskpredict-lean {row['setting']}, batch {bsz}: lean/generic "
                    f"{row['lean_over_generic']:.2f}x, lean/fairseq "
                    f"{row['lean_over_fairseq']:.2f}x, BLEU {row['bleu']}, identical "
                    f"{row['identical_to_generic']:.0%} (load {before:.2f} -> {after:.2f})",
                    flush=True,
                )
        task.cfg.length_offset = 0
    return {
        "command": COMMAND,
        "date": time.strftime("%Y-%m-%d"),
        "torch": torch.__version__,
        "hardware": common.hardware("cpu"),
        "torch_threads": torch.get_num_threads(),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "student": repository_path(STUDENT),
        "student_sha256": student_digest(STUDENT),
        "rounds": rounds,
        "uptime_start": start,
        "uptime_end": uptime(),
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog=COMMAND, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--rounds", type=int, default=3, help="interleaved timed rounds (default: %(default)s)"
    )
    p.add_argument("--out", type=Path, default=RESULTS, help="results file (default: %(default)s)")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error(f"--rounds must be >= 1, got {args.rounds}")
    write_json(args.out, measure(rounds=args.rounds))


if __name__ == "__main__":
    main()

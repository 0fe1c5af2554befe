"""A stopping rule for mask-predict measured on val outside the test sample (issue 76, item 3):
a length candidate stops at the first pass that changes none of its tokens (every re-masked slot
predicted as it was before), and keeps that pass's prediction, instead of running all
``--iter-decode-max-iter`` + 1 passes (the plugin's adaptive stop ends a candidate only once a
pass re-masks nothing and changes nothing, which in practice is at the last passes).

The rule is not exact (a later pass re-masks other slots and can change them), so the product
does not apply it; this script measures what it would cost and save on the shipped student:
sacreBLEU on ``examples/quickstart/data/valid`` (200 pairs of Multi30k val, outside the test
sample's lines 201-700) in the student's own input format, with the rule and without (the
product's decoding), the passes the rule runs per length candidate, and the time of both at
batch 64 (one thread, interleaved rounds, the load average beside).

    OMP_NUM_THREADS=1 python -m reproduction.hi_cmlm.stop_unchanged

writes ``reproduction/hi_cmlm/stop_unchanged.json``. The loop is the product's lean loop
(``fairseq_ext.generation.lean_mask_predict``) with the rule added.
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
from argparse import Namespace
from pathlib import Path

import torch

from fairseq_ext.generation.lean_mask_predict import (
    VocabularyProjection,
    _hypothesis,
    _Slots,
    predict_masked,
    remask,
)
from reproduction.benchmarks import common, own_inputs
from reproduction.benchmarks.frontier import bleu, setting_name
from reproduction.benchmarks.hicmlm import student_digest
from reproduction.benchmarks.maskpredict_lean import uptime
from reproduction.records import ROOT, write_json

RESULTS = ROOT / "reproduction" / "hi_cmlm" / "stop_unchanged.json"
COMMAND = "OMP_NUM_THREADS=1 python -m reproduction.hi_cmlm.stop_unchanged"
STUDENT = own_inputs.MODEL_DIR / "checkpoint.pt"
SETTINGS = [(4, 3, 2), (10, 1, 0), (10, 3, 2)]  # passes, length beam, --length-offset
SPLIT, SENTENCES, BATCH = "valid", 200, 64


def decode_stopping_when_unchanged(
    model, sample: dict, passes: int, beam: int, unk: int, projection: VocabularyProjection
) -> tuple[list[list[dict]], list[int]]:
    """``lean_mask_predict.decode`` with the rule (module docstring) in place of adaptive
    termination: the best hypothesis of each sentence, and the passes each length candidate ran."""
    src_tokens, src_lengths = sample["net_input"]["src_tokens"], sample["net_input"]["src_lengths"]
    bsz, decoder = src_tokens.size(0), model.decoder
    finalized: list = [None] * (bsz * beam)
    ran = [passes] * (bsz * beam)
    with torch.inference_mode():
        encoder_out = model.forward_encoder([src_tokens, src_lengths])
        slots = _Slots(model, encoder_out, src_tokens, beam)
        predicted = None  # the previous pass's prediction, before re-masking
        for step in range(passes):
            tokens, scores = slots.tokens, slots.scores
            predict_masked(slots, decoder, encoder_out, projection, unk)
            done = (
                torch.ones_like(slots.row, dtype=torch.bool)
                if step == passes - 1
                else (tokens == predicted).all(dim=1)
                if predicted is not None
                else torch.zeros_like(slots.row, dtype=torch.bool)
            )
            for i in done.nonzero(as_tuple=False).view(-1).tolist():
                row = slots.row[i].item()
                finalized[row], ran[row] = (
                    _hypothesis(step, tokens[i], scores[i], slots.non_pad[i]),
                    step + 1,
                )
            if bool(done.all()):
                break
            if bool(done.any()):
                slots.keep((~done).nonzero(as_tuple=False).view(-1))
                tokens, scores = slots.tokens, slots.scores
            predicted = tokens.clone()
            remask(slots, step, passes, unk)
        if beam > 1:
            pick = (
                torch.stack([f["score"] for f in finalized]).view(bsz, beam).argmax(dim=1).tolist()
            )
            finalized = [finalized[i * beam + b] for i, b in enumerate(pick)]
    return [[hypo] for hypo in finalized], ran


def measure(rounds: int = 3) -> dict:
    logging.getLogger("fairseq").setLevel(logging.WARNING)
    common.load_plugin()
    torch.set_num_threads(1)
    sp, refs, rows = own_inputs.sentencepiece(), own_inputs.references(SENTENCES, SPLIT), []
    start = uptime()
    with tempfile.TemporaryDirectory(prefix="fairseq_ext_stop_") as tmp, torch.no_grad():
        data = own_inputs.binarise_sample(SENTENCES, Path(tmp), SPLIT)
        model, task, sources = own_inputs.load(STUDENT, data)
        d, unk = task.target_dictionary, task.target_dictionary.unk()
        batches = own_inputs.batches(task, sources, BATCH)
        for passes, beam, offset in SETTINGS:
            task.cfg.length_offset = offset
            product = task.build_generator(
                [model], Namespace(iter_decode_max_iter=passes - 1, iter_decode_with_beam=beam)
            )
            projection, outputs, ran = VocabularyProjection(), {}, []

            def with_rule():
                pairs = []
                ran.clear()
                for b in batches:
                    hypos, counts = decode_stopping_when_unchanged(
                        model, b, passes, beam, unk, projection
                    )
                    pairs += [(int(i), h[0]["tokens"]) for i, h in zip(b["id"], hypos)]
                    ran.extend(counts)
                outputs["rule"] = [t for _, t in sorted(pairs, key=lambda p: p[0])]

            def without():
                pairs = [
                    (int(i), h[0]["tokens"])
                    for b in batches
                    for i, h in zip(b["id"], product.generate([model], b))
                ]
                outputs["product"] = [t for _, t in sorted(pairs, key=lambda p: p[0])]

            with_rule(), without()  # warm-up
            before = common.load_average()
            secs = common.interleaved_medians(
                {"rule": with_rule, "product": without}, reps=rounds, device="cpu", warmup=0
            )
            after = common.load_average()
            scores = {
                k: round(bleu([own_inputs.pieces(t, d) for t in v], refs, sp), 2)
                for k, v in outputs.items()
            }
            row = {
                "setting": setting_name(passes, beam, offset),
                "passes": passes,
                "length_beam": beam,
                "length_offset": offset,
                "bleu_product": scores["product"],
                "bleu_rule": scores["rule"],
                "bleu_change": round(scores["rule"] - scores["product"], 2),
                "mean_passes_rule": round(sum(ran) / len(ran), 2),
                "changed_sentences": sum(
                    not torch.equal(a, b) for a, b in zip(outputs["rule"], outputs["product"])
                ),
                "rule_over_product_speed": round(secs["product"] / secs["rule"], 3),
                "load_before": round(before, 2),
                "load_after": round(after, 2),
            }
            rows.append(row)
            print(
                f"stop-unchanged {row['setting']}: BLEU {row['bleu_product']} -> "
                f"{row['bleu_rule']}, {row['mean_passes_rule']} passes of {passes}, "
                f"{row['rule_over_product_speed']:.2f}x (load {before:.2f} -> {after:.2f})",
                flush=True,
            )
        task.cfg.length_offset = 0
    return {
        "command": COMMAND,
        "date": time.strftime("%Y-%m-%d"),
        "torch": torch.__version__,
        "hardware": common.hardware("cpu"),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "student_sha256": student_digest(STUDENT),
        "data": f"examples/quickstart/data/{SPLIT}, {SENTENCES} pairs",
        "batch": BATCH,
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
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error(f"--rounds must be >= 1, got {args.rounds}")
    write_json(RESULTS, measure(args.rounds))


if __name__ == "__main__":
    main()

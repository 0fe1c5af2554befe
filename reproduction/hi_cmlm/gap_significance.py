"""Is the length offset's gain real, and how far is the student from its teacher (issue 76)?
Paired bootstrap resampling (Koehn 2004, sacreBLEU's ``paired-bs``, 1000 resamples) on the
shipped 500-sentence test sample, each model given its own task's input (``own_inputs``):

* the student (10 passes, length beam 3) with ``--length-offset 2`` against the same student
  with offset 0 (the offset was chosen on val outside the sample: ``length_offset.py``);
* the teacher's beam 5 (fairseq) against the student with offset 2.

One checkpoint of each: this says whether a decoding setting of that student is better on
these sentences, not how another training seed would fare.

    python -m reproduction.hi_cmlm.gap_significance

Writes ``reproduction/hi_cmlm/gap_significance.json`` and the block of docs/results/speed.md.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from reproduction.benchmarks import frontier, own_inputs
from reproduction.records import ROOT
from reproduction.results_page import write_between_markers

RESULTS = ROOT / "reproduction" / "hi_cmlm" / "gap_significance.json"
PAGE = ROOT / "docs" / "results" / "speed.md"
MARKERS = ("<!-- gap-significance:start -->", "<!-- gap-significance:end -->")
RESAMPLES = 1000
STUDENT_OFFSET_0, STUDENT_OFFSET_2 = (10, 3, 0), (10, 3, frontier.LENGTH_OFFSET)
# (baseline, system): sacreBLEU's paired test asks whether the system differs from the baseline
PAIRS = [
    (
        "student, " + frontier.setting_name(*STUDENT_OFFSET_0),
        "student, " + frontier.setting_name(*STUDENT_OFFSET_2),
    ),
    ("student, " + frontier.setting_name(*STUDENT_OFFSET_2), "teacher 3+3, beam 5"),
]


def decode_sample(n: int) -> dict[str, list[str]]:
    """Detokenized outputs on the first ``n`` sentences of the sample, by system name."""
    sp = own_inputs.sentencepiece()
    with tempfile.TemporaryDirectory(prefix="fairseq_ext_gap_") as tmp:
        work = Path(tmp)
        data = own_inputs.binarise_sample(n, work)
        decoders = frontier.mask_predict_decoders(data, [STUDENT_OFFSET_0, STUDENT_OFFSET_2])
        decoders += frontier.autoregressive_decoders(
            "teacher 3+3", frontier.TEACHERS["teacher 3+3"], data, work, [("fairseq", "float32", 5)]
        )
        names = [
            "student, " + d.setting if d.model.startswith("student") else "teacher 3+3, beam 5"
            for d in decoders
        ]
        with torch.no_grad():
            return {
                name: [sp.decode_pieces(p) for p in d.decode(d.batches(64, n))]
                for name, d in zip(names, decoders)
            }


def paired_bootstrap(
    outputs: dict[str, list[str]], refs: list[str], pairs=PAIRS, resamples: int = RESAMPLES
) -> list[dict]:
    """A row per ``(baseline, system)``: both corpus BLEUs, the difference, the bootstrap's mean
    and 95% interval of the system's BLEU, and its p-value (sacreBLEU's ``paired-bs``)."""
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    rows = []
    for baseline, system in pairs:
        test = PairedTest(
            [(baseline, outputs[baseline]), (system, outputs[system])],
            {"BLEU": BLEU()},
            [refs],
            test_type="bs",
            n_samples=resamples,
        )  # seeded: SACREBLEU_SEED, default 12345
        _, results = test()
        base, sys_ = results["BLEU"]
        rows.append(
            {
                "baseline": baseline,
                "system": system,
                "baseline_bleu": round(base.score, 2),
                "system_bleu": round(sys_.score, 2),
                "difference": round(sys_.score - base.score, 2),
                "system_mean": round(sys_.mean, 2),
                "system_ci95": round(sys_.ci, 2),
                "p_value": round(sys_.p_value, 4),
            }
        )
    return rows


def render(result: dict) -> str:
    lines = [
        f"Paired bootstrap ({result['resamples']} resamples, sacreBLEU's `paired-bs`) on the "
        f"first {result['sentences']} sentences of the shipped test sample "
        f"(`{result['command']}`, {result['date']}):",
        "",
        "| baseline | system | baseline BLEU | system BLEU | difference | system 95% interval | "
        "p |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['baseline']} | {r['system']} | {r['baseline_bleu']:.2f} | {r['system_bleu']:.2f} "
        f"| {r['difference']:+.2f} | {r['system_mean']:.2f} ± {r['system_ci95']:.2f} | "
        f"{r['p_value']:.4f} |"
        for r in result["rows"]
    ]
    lines += [
        "",
        "One checkpoint per model: p says whether the systems differ on these sentences (p < "
        "0.05), not how another training seed of the student would compare.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m reproduction.hi_cmlm.gap_significance",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--sentences", type=int, default=frontier.WHOLE_SAMPLE)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    outputs = decode_sample(args.sentences)
    result = {
        "command": "python -m reproduction.hi_cmlm.gap_significance",
        "date": time.strftime("%Y-%m-%d"),
        "sentences": args.sentences,
        "resamples": RESAMPLES,
        "rows": paired_bootstrap(outputs, own_inputs.references(args.sentences)),
    }
    RESULTS.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    write_between_markers(PAGE, render(result), *MARKERS)
    print(render(result))
    print(f"wrote {RESULTS.relative_to(ROOT)} and the block of {PAGE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

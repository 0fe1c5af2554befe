"""Choose ``--length-offset`` on Multi30k val: the shipped student decoded (mask-predict, 10
passes, length beam 3, the README's setting) with each offset, scored with sacreBLEU on the val
sentences outside the shipped test sample (val lines 201-700 are the sample: they are left out,
so that the sample stays held out for the bench), with the brevity penalty beside the score.

    python -m reproduction.hi_cmlm.length_offset --data BIN --ref VAL_DE [--offsets -1 0 1 2 3 4]

BIN: Multi30k binarised with the shipped sentencepiece model and dictionary (the ``valid`` split
is Multi30k val; ``reproduction/hi_cmlm/deep_shallow_teacher.sh`` writes one under
``work/deep-shallow-teacher/data/bin``). Writes ``reproduction/hi_cmlm/length_offset.json`` and
the block of docs/results/speed.md.
"""

from __future__ import annotations

import argparse
import json
import time
from argparse import Namespace
from pathlib import Path

import torch

from reproduction.benchmarks import own_inputs
from reproduction.records import ROOT
from reproduction.results_page import write_between_markers

RESULTS = ROOT / "reproduction" / "hi_cmlm" / "length_offset.json"
PAGE = ROOT / "docs" / "results" / "speed.md"
MARKERS = ("<!-- length-offset:start -->", "<!-- length-offset:end -->")
SAMPLE_LINES = range(200, 700)  # 0-based: val lines 201-700, the shipped test sample
PASSES, LENGTH_BEAM = 10, 3


def decode_val(data: Path, refs: list[str], offsets: list[int]) -> list[dict]:
    """A row per offset: sacreBLEU, brevity penalty and length ratio on val outside the sample."""
    import sacrebleu
    from fairseq import checkpoint_utils

    from fairseq_ext import plugin

    plugin.load()
    (model,), _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(own_inputs.MODEL_DIR / "checkpoint.pt")], arg_overrides={"data": str(data)}
    )
    model.eval().float()
    task.load_dataset("valid")
    dataset = task.dataset("valid")
    keep = [i for i in range(len(dataset)) if i not in SAMPLE_LINES]
    sp, rows = own_inputs.sentencepiece(), []
    for offset in offsets:
        task.cfg.length_offset = offset
        generator = task.build_generator(
            [model], Namespace(iter_decode_max_iter=PASSES - 1, iter_decode_with_beam=LENGTH_BEAM)
        )
        hyps = {}
        with torch.no_grad():
            for start in range(0, len(keep), 64):
                batch = dataset.collater([dataset[i] for i in keep[start : start + 64]])
                for i, hypos in zip(batch["id"].tolist(), generator.generate([model], batch)):
                    hyps[i] = sp.decode_pieces(own_inputs.pieces(hypos[0]["tokens"], task.tgt_dict))
        score = sacrebleu.corpus_bleu([hyps[i] for i in keep], [[refs[i] for i in keep]])
        rows.append(
            {
                "length_offset": offset,
                "bleu": round(score.score, 2),
                "bp": round(score.bp, 3),
                "ratio": round(score.sys_len / score.ref_len, 3),
            }
        )
        print(f"length offset {offset}: BLEU {score.score:.2f} (BP {score.bp:.3f})", flush=True)
    return rows


def render(result: dict) -> str:
    best = max(result["rows"], key=lambda r: r["bleu"])
    lines = [
        "`--length-offset` chosen on Multi30k val outside the shipped test sample "
        f"({result['sentences']} sentences; shipped student, {PASSES} passes, length beam "
        f"{LENGTH_BEAM}; `{result['command']}`, {result['date']}, {result['hardware']}):",
        "",
        "| length offset | sacreBLEU | brevity penalty | length ratio |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {r['length_offset']} | {r['bleu']:.2f} | {r['bp']:.3f} | {r['ratio']:.3f} |"
        for r in result["rows"]
    ]
    lines += [
        "",
        f"Best: {best['length_offset']} ({best['bleu']:.2f}); the bench decodes with it beside 0.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    from fairseq_ext.analysis.hardware import cpu_name

    p = argparse.ArgumentParser(
        prog="python -m reproduction.hi_cmlm.length_offset",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--ref", type=Path, required=True, help="Multi30k val.de, raw text")
    p.add_argument("--offsets", type=int, nargs="+", default=[-1, 0, 1, 2, 3, 4])
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    refs = args.ref.read_text(encoding="utf-8").splitlines()
    rows = decode_val(args.data, refs, args.offsets)
    result = {
        "command": "python -m reproduction.hi_cmlm.length_offset --data BIN --ref VAL_DE",
        "date": time.strftime("%Y-%m-%d"),
        "hardware": f"{cpu_name()}, 1 thread",
        "sentences": len(refs) - len(SAMPLE_LINES),
        "rows": rows,
    }
    RESULTS.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    write_between_markers(PAGE, render(result), *MARKERS)
    print(f"wrote {RESULTS.relative_to(ROOT)} and the block of {PAGE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

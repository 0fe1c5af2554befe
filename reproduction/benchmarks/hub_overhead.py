"""What a Python API call costs around its decode (issue 86): one sentence per call, the whole
call against the decoder's own time on the same sentences, in one process.

Three sides per row, timed by ``common.interleaved_medians`` (the sides alternate, reversed
every other round; each side's median over ``--rounds`` rounds), torch on ``--threads`` threads:

* ``decode``: the decoder alone on the sentences already collated: for ``translate`` the lean
  loop (``lean_mask_predict.decode``) with the interface's own vocabulary projection, for
  ``summarize`` the task's beam search (``task.inference_step``) with a generator built once;
* ``call``: ``translate`` / ``summarize`` of the raw sentence, one call each (tokenize, check,
  binarize, collate, build the generator, decode, detokenize);
* ``fairseq generate``: the same call through fairseq's ``GeneratorHubInterface.generate`` and
  ``_build_batches`` (a deep copy of the generation configuration, a dataset and a batch
  iterator per call: the API's path before issue 86).

Rows: the shipped student (``hi-cmlm-multi30k-en-de``, float and ``int8_decoding``; 2 and 10
passes, length beam 3) and a ProphetNet (``prophetnet_tiny`` with the tests' 1-layer 32-wide
dimensions, random weights, seed 1, over the student's dictionaries and sentencepiece model;
beam 4, at most ``--max-len-b`` output tokens). Every side's outputs are checked equal. The
results file records the processor, the core count and ``uptime`` before and after: on a busy
machine the times move, the ratios measured side by side much less.

    python -m reproduction.benchmarks.hub_overhead  # results/hub_overhead.json, docs table
    python -m reproduction.benchmarks.hub_overhead --render  # the docs table from the file
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import torch

from reproduction.benchmarks import common
from reproduction.results_page import write_between_markers

SAMPLE = common.ROOT / "examples" / "quickstart" / "data" / "test.en"
SHIPPED = "hi-cmlm-multi30k-en-de"
OUT = Path(__file__).resolve().parent / "results" / "hub_overhead.json"
PAGE = common.ROOT / "docs" / "python-api.md"
START, END = "<!-- hub-overhead:start -->", "<!-- hub-overhead:end -->"
COMMAND = "python -m reproduction.benchmarks.hub_overhead"
TINY = [
    "--encoder-layers",
    "1",
    "--decoder-layers",
    "1",
    "--encoder-embed-dim",
    "32",
    "--decoder-embed-dim",
    "32",
    "--encoder-ffn-embed-dim",
    "64",
    "--decoder-ffn-embed-dim",
    "64",
    "--encoder-attention-heads",
    "2",
    "--decoder-attention-heads",
    "2",
]


def uptime() -> str:
    """``uptime``'s line (the load averages over 1, 5 and 15 minutes)."""
    return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()


@contextmanager
def fairseq_generate(model):
    """Calls of ``model`` through fairseq's own ``generate`` and ``_build_batches``."""
    from fairseq.hub_utils import GeneratorHubInterface

    cls = type(model)
    saved = cls.generate, cls._build_batches
    cls.generate, cls._build_batches = (
        GeneratorHubInterface.generate,
        GeneratorHubInterface._build_batches,
    )
    try:
        yield
    finally:
        cls.generate, cls._build_batches = saved


def measure(model, method: str, options: dict, decode_one, sentences: list, rounds: int) -> dict:
    """Seconds per sentence of the three sides (module docstring), their ratios to ``decode``,
    and the check that every side gives the same outputs."""
    call = getattr(model, method)
    samples = [model._build_batches([model.encode(s)], False)[0] for s in sentences]
    outputs = {
        "decode": [model.decode(decode_one(sample)["tokens"]) for sample in samples],
        "call": [call(s, **options) for s in sentences],
    }
    with fairseq_generate(model):
        outputs["fairseq generate"] = [call(s, **options) for s in sentences]
    if not outputs["decode"] == outputs["call"] == outputs["fairseq generate"]:
        raise SystemExit(f"{method} {options}: the sides gave different outputs")

    def before():
        with fairseq_generate(model):
            for s in sentences:
                call(s, **options)

    sides = {
        "decode": lambda: [decode_one(sample) for sample in samples],
        "call": lambda: [call(s, **options) for s in sentences],
        "fairseq generate": before,
    }
    cpu = {name: [] for name in sides}

    def on_cpu(name):
        def side():
            start = time.process_time()
            sides[name]()
            cpu[name].append(time.process_time() - start)

        return side

    wall = common.interleaved_medians({name: on_cpu(name) for name in sides}, rounds, "cpu")
    result = {}
    for clock, seconds in (
        ("cpu", {name: statistics.median(times[1:]) for name, times in cpu.items()}),
        ("wall", wall),
    ):
        ms = {name: 1000 * seconds[name] / len(sentences) for name in sides}
        result[clock] = {
            "ms_per_sentence": {name: round(t, 3) for name, t in ms.items()},
            "call_over_decode": round(ms["call"] / ms["decode"], 3),
            "fairseq_generate_over_decode": round(ms["fairseq generate"] / ms["decode"], 3),
        }
    return result


def hicmlm_rows(sentences: list, rounds: int) -> list[dict]:
    from fairseq_ext import hub
    from fairseq_ext.generation import lean_mask_predict

    rows = []
    for int8 in (False, True):
        # the bare loop stops at its last pass: the call's output too (no removal of repeats)
        model = hub.from_pretrained(SHIPPED, int8_decoding=int8, remove_repeats=0)
        unk = model.tgt_dict.unk()
        for passes in (2, 10):

            def decode_one(sample, passes=passes, model=model):
                (hypos,) = lean_mask_predict.decode(
                    model.models[0], sample, passes - 1, 3, True, unk, model.projection
                )
                return hypos[0]

            row = measure(model, "translate", {"passes": passes}, decode_one, sentences, rounds)
            setting = f"{'int8' if int8 else 'float'}, {passes} passes, length beam 3"
            rows.append({"method": "translate", "model": SHIPPED, "setting": setting, **row})
    return rows


def prophetnet_interface(max_len_b: int):
    """A ``Seq2SeqHubInterface`` over a random-weight ``prophetnet_tiny`` (module docstring)."""
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    from fairseq_ext.hub.generation import Seq2SeqHubInterface
    from fairseq_ext.hub.loading import model_folder

    folder = model_folder(SHIPPED)
    torch.manual_seed(1)
    task, model, _, args = common.build(
        [str(folder), "--task", "translation_prophetnet", "-s", "en", "-t", "de"]
        + ["--arch", "prophetnet_tiny", *TINY, "--seed", "1", "--bpe", "sentencepiece"]
        + ["--sentencepiece-model", str(folder / "spm.model")]
    )
    cfg = convert_namespace_to_omegaconf(args)
    cfg.generation.beam, cfg.generation.max_len_b = 4, max_len_b
    return Seq2SeqHubInterface(cfg, task, [model]).eval()


def prophetnet_row(sentences: list, rounds: int, max_len_b: int) -> dict:
    model = prophetnet_interface(max_len_b)
    generator = model.generator(4, {})

    def decode_one(sample):
        return model.task.inference_step(generator, model.models, sample)[0][0]

    row = measure(model, "summarize", {}, decode_one, sentences, rounds)
    setting = f"beam 4, at most {max_len_b} tokens out"
    return {"method": "summarize", "model": "prophetnet_tiny (random)", "setting": setting, **row}


def render(result: dict) -> str:
    """The docs table of ``result`` (the results file's contents)."""
    lines = [
        f"`{COMMAND}` ({result['hardware']}, {result['rounds']} interleaved rounds, "
        f"{result['sentences']} sentences one per call; load average {result['load_before']} "
        f"before, {result['load_after']} after, on {result['cores']} cores):",
        "",
        "| call | setting | decode ms | call ms | call / decode | before (fairseq's generate) "
        "/ decode | wall: call / decode, before / decode |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        cpu, wall = row["cpu"], row["wall"]
        ms = cpu["ms_per_sentence"]
        lines.append(
            f"| `{row['method']}` | {row['setting']} | {ms['decode']:.2f} | {ms['call']:.2f} "
            f"| {cpu['call_over_decode']:.2f} | {cpu['fairseq_generate_over_decode']:.2f} "
            f"| {wall['call_over_decode']:.2f}, {wall['fairseq_generate_over_decode']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-len-b", type=int, default=20)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--page", type=Path, default=PAGE)
    parser.add_argument("--render", action="store_true", help="only redraw the docs table")
    args = parser.parse_args(argv)
    if args.render:
        result = json.loads(args.out.read_text(encoding="utf-8"))
        write_between_markers(args.page, render(result), START, END)
        return result

    sentences = SAMPLE.read_text(encoding="utf-8").splitlines()[: args.sentences]
    load_before, uptime_before = common.load_average(), uptime()
    with common.cpu_threads("cpu", args.threads):
        rows = hicmlm_rows(sentences, args.rounds)
        rows.append(prophetnet_row(sentences, args.rounds, args.max_len_b))
        hardware = common.hardware("cpu")
    load_after = common.load_average()
    result = {
        "command": COMMAND,
        "sentences": len(sentences),
        "rounds": args.rounds,
        "hardware": hardware,
        "cores": os.cpu_count(),
        "load_before": round(load_before, 2),
        "load_after": round(load_after, 2),
        "uptime_before": uptime_before,
        "uptime_after": uptime(),
        "rows": rows,
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    write_between_markers(args.page, render(result), START, END)
    print(render(result))
    return result


if __name__ == "__main__":
    main()

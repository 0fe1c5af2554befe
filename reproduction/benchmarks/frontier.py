"""Mask-predict against the autoregressive engine users deploy (issue 76; Helcl et al. 2022,
"Non-autoregressive machine translation: it's not as fast as it seems"; Kasai et al. 2021,
"Deep encoder, shallow decoder"), side by side in one process, one thread, on the same
sentences of the shipped test sample:

* the shipped student (``examples/quickstart/model/checkpoint.pt``, 3+1 x 192), the plugin's
  mask-predict (``cmlm_hybrid``'s generator, as ``fairseq-generate`` builds it) at 2, 3, 4 and
  10 passes, length beam 1 and 3, without and with ``--length-offset`` (``MASK_PREDICT``), and
  with ``--int8-decoding`` (``MASK_PREDICT_INT8``);
* its autoregressive teacher (``teacher.pt``, 3+3 x 192), fairseq's beam search (beam 1 and 5)
  and CTranslate2 (the teacher converted by ``ct2-fairseq-converter``), float32 and int8, beam 1
  and 5 (``ENGINES``);
* a deep-encoder, shallow-decoder autoregressive model of the student's 3+1 x 192 shape
  (``reproduction/hi_cmlm/models/teacher_3_1.pt``, not in git: made by
  ``reproduction/hi_cmlm/deep_shallow_teacher.sh``), decoded the same ways, where it has been
  trained.

Every model is given the input its own task binarises (``own_inputs``). Speeds are sentences/s
at batch 1 (``SENTENCES[1]`` sentences) and batch 64 (``SENTENCES[64]``), the median of
``ROUNDS`` interleaved rounds after a short warm-up (``common.interleaved_medians``), with the
sacreBLEU of the very outputs timed and the 1-minute load average around each batch size; beside
them the arithmetic of that decoding, MFLOP a sentence (torch's ``FlopCounterMode`` on the very
decoding after the timing: matrix products, 2 per multiply-add, an int8 product as its float
shapes; CTranslate2's rows take fairseq's count of the same model and beam), and the effective
GFLOP/s it ran at (MFLOP a sentence x sentences/s / 1000). The quality of each model on the
whole 500-sentence sample (teacher beam 5, the student's default 10 passes and length beam 3)
gives the student's distance from its teacher.

    python -m reproduction.benchmarks.run --only frontier      # writes results/cpu.json,
    frontier.png
"""

from __future__ import annotations

import functools
import logging
import math
import re
import statistics
import subprocess
import sys
import tempfile
from argparse import Namespace
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

from fairseq_ext.common.errors import require
from reproduction.benchmarks import common, own_inputs
from reproduction.benchmarks.hicmlm import student_digest

STUDENT = own_inputs.MODEL_DIR / "checkpoint.pt"
TEACHERS = {
    "teacher 3+3": own_inputs.MODEL_DIR / "teacher.pt",
    "deep-shallow AR 3+1": common.ROOT / "reproduction" / "hi_cmlm" / "models" / "teacher_3_1.pt",
}
# the bench-only model is not in git: its script makes it
MADE_BY = {"deep-shallow AR 3+1": "reproduction/hi_cmlm/deep_shallow_teacher.sh"}
SENTENCES = {1: 128, 64: 256}
QUICK_SENTENCES = {1: 4, 64: 8}
ROUNDS, QUICK_ROUNDS = 3, 1
LENGTH_OFFSET = (
    2  # --length-offset chosen on Multi30k val outside the test sample (docs/results/speed.md)
)
# (passes, length beam, --length-offset)
MASK_PREDICT = [(2, 1, 0), (3, 1, 0), (4, 1, 0), (10, 1, 0), (2, 3, 0), (4, 3, 0), (10, 3, 0)] + [
    (T, lb, LENGTH_OFFSET) for T, lb in ((2, 1), (4, 1), (4, 3), (10, 3))
]
MASK_PREDICT_INT8 = [
    (T, lb, LENGTH_OFFSET) for T, lb in ((2, 1), (4, 1), (4, 3), (10, 3))
]  # with --int8-decoding
ENGINES = [
    ("fairseq", "float32", 1),
    ("fairseq", "float32", 5),
    ("ctranslate2", "float32", 1),
    ("ctranslate2", "float32", 5),
    ("ctranslate2", "int8", 1),
    ("ctranslate2", "int8", 5),
]
WHOLE_SAMPLE = 500
STUDENT_DEFAULT = (10, 3, 0)  # the README's setting
STUDENT_BEST = (10, 3, LENGTH_OFFSET)
# issue 76's goals, read by ``goals``: the best mask-predict setting at no lower BLEU over
# CTranslate2 int8 beam 5 of the teacher, at batch 1 and 64; the student within 2 BLEU of its
# teacher
GOALS = {
    "maskpredict_over_ct2_int8_beam5_b1": ">= 1",
    "maskpredict_over_ct2_int8_beam5_b64": ">= 1",
    "student_gap_to_teacher_bleu": "<= 2",
}


@dataclass(frozen=True)
class Decoder:
    """One decoder setting: the model it decodes, how, the function that decodes a list of
    batches (its own input format) into pieces per sentence, in line order, and the FLOPs a
    sentence of that decoding."""

    model: str
    engine: str
    setting: str
    decode: Callable[[list], list[list[str]]]
    batches: Callable[[int, int], list]  # (batch size, sentences) -> the batches decode takes
    flops: Callable[[int, int], float]  # (batch size, sentences) -> FLOPs a sentence


def _int8_product_flops(x_shape, *args, out_shape=None, **kwargs) -> int:
    """FLOPs of an int8 ``Linear`` (``quantized::linear_dynamic``): its float product's."""
    return 2 * math.prod(x_shape) * out_shape[-1]


def flop_counter(decode, batches) -> Callable[[int, int], float]:
    """``(batch size, sentences) -> FLOPs a sentence`` of ``decode`` over those batches, counted
    by ``FlopCounterMode`` (once per size)."""

    @functools.cache
    def flops(bsz: int, n: int) -> float:
        counter = FlopCounterMode(
            display=False,
            custom_mapping={torch.ops.quantized.linear_dynamic: _int8_product_flops},
        )
        with counter, torch.no_grad():
            decode(batches(bsz, n))
        return counter.get_total_flops() / n

    return flops


def _in_line_order(pairs: list[tuple[int, list[str]]]) -> list[list[str]]:
    return [p for _, p in sorted(pairs, key=lambda x: x[0])]


def _fairseq_decoder(
    model_name: str, engine: str, setting: str, generator, model, task, sources
) -> Decoder:
    d = task.target_dictionary

    def decode(batches):
        return _in_line_order(
            [
                (int(i), own_inputs.pieces(hypos[0]["tokens"], d))
                for b in batches
                for i, hypos in zip(b["id"], generator.generate([model], b))
            ]
        )

    batches = functools.partial(_own_batches, task, sources)
    return Decoder(model_name, engine, setting, decode, batches, flop_counter(decode, batches))


def _own_batches(task, sources, bsz: int, n: int) -> list:
    return own_inputs.batches(task, sources[:n], bsz)


def setting_name(passes: int, length_beam: int, offset: int) -> str:
    """How the rows name a mask-predict setting."""
    return f"{passes} passes, length beam {length_beam}" + (
        f", length offset {offset}" if offset else ""
    )


def mask_predict_decoders(data: Path, settings=MASK_PREDICT, int8: bool = False) -> list[Decoder]:
    """The student's mask-predict settings ``(passes, length beam, --length-offset)``, each with
    ``cmlm_hybrid``'s own generator (``int8``: as ``--int8-decoding`` builds it, on a copy of the
    student of its own). A generator sets the decoder's length offset when it is built, so each
    setting's decoding builds its generator anew (as ``fairseq-generate`` does once)."""
    model, task, sources = own_inputs.load(STUDENT, data)
    task.cfg.int8_decoding = int8
    engine = "fairseq_ext mask-predict" + (" int8" if int8 else "")
    return [
        _mask_predict(model, task, sources, engine, T, lb, offset) for T, lb, offset in settings
    ]


def _mask_predict(
    model, task, sources, engine: str, passes: int, length_beam: int, offset: int
) -> Decoder:
    d = task.target_dictionary
    args = Namespace(iter_decode_max_iter=passes - 1, iter_decode_with_beam=length_beam)

    def decode(batches):
        task.cfg.length_offset = offset
        generator = task.build_generator([model], args)
        return _in_line_order(
            [
                (int(i), own_inputs.pieces(hypos[0]["tokens"], d))
                for b in batches
                for i, hypos in zip(b["id"], generator.generate([model], b))
            ]
        )

    batches = functools.partial(_own_batches, task, sources)
    return Decoder(
        "student 3+1",
        engine,
        setting_name(passes, length_beam, offset),
        decode,
        batches,
        flop_counter(decode, batches),
    )


def convert_ctranslate2(checkpoint: Path, quantization: str, out: Path) -> Path:
    """``out``: ``checkpoint`` converted by CTranslate2's ``ct2-fairseq-converter`` (it loads the
    checkpoint through fairseq with ``--user_dir`` the plugin, whose allow-list lets torch load
    it)."""
    converter = Path(sys.executable).parent / "ct2-fairseq-converter"
    proc = subprocess.run(
        [
            str(converter),
            "--model_path",
            str(checkpoint),
            "--data_dir",
            str(own_inputs.MODEL_DIR),
            "--user_dir",
            common.USER_DIR,
            "--source_lang",
            "en",
            "--target_lang",
            "de",
            "--quantization",
            quantization,
            "--output_dir",
            str(out),
            "--force",
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"ct2-fairseq-converter failed on {checkpoint}: {proc.stderr[-2000:]}")
    return out


def autoregressive_decoders(
    model_name: str, checkpoint: Path, data: Path, work: Path, engines=ENGINES
) -> list[Decoder]:
    """fairseq's beam search and CTranslate2 of one autoregressive checkpoint, each given the
    checkpoint's own task's input (CTranslate2 the same pieces, without the ``</s>`` it adds);
    CTranslate2's FLOPs are those of fairseq's beam search of the same beam."""
    import ctranslate2

    model, task, sources = own_inputs.load(checkpoint, data)
    src_pieces = [own_inputs.pieces(s, task.source_dictionary) for s in sources]
    out, converted = [], {}

    @functools.cache
    def fairseq(beam: int) -> Decoder:
        generator = task.build_generator([model], Namespace(beam=beam))
        setting = f"float32, beam {beam}"
        return _fairseq_decoder(model_name, "fairseq", setting, generator, model, task, sources)

    for engine, dtype, beam in engines:
        setting = f"{dtype}, beam {beam}"
        if engine == "fairseq":
            out.append(fairseq(beam))
            continue
        if dtype not in converted:
            folder = convert_ctranslate2(checkpoint, dtype, work / f"ct2-{checkpoint.stem}-{dtype}")
            converted[dtype] = ctranslate2.Translator(
                str(folder), device="cpu", compute_type=dtype, inter_threads=1, intra_threads=1
            )
        translator = converted[dtype]

        def decode(batches, translator=translator, beam=beam):
            return [
                r.hypotheses[0]
                for b in batches
                for r in translator.translate_batch(
                    b, beam_size=beam, max_batch_size=len(b), max_decoding_length=200
                )
            ]

        out.append(
            Decoder(
                model_name,
                f"CTranslate2 {ctranslate2.__version__}",
                setting,
                decode,
                lambda bsz, n: [src_pieces[i : min(i + bsz, n)] for i in range(0, n, bsz)],
                fairseq(beam).flops,
            )
        )
    return out


def bleu(outputs: list[list[str]], refs: list[str], sp) -> float:
    """sacreBLEU (its defaults) of the outputs, detokenized by the shipped sentencepiece model."""
    import sacrebleu

    return sacrebleu.corpus_bleu([sp.decode_pieces(p) for p in outputs], [refs]).score


def timed_rows(decoders: list[Decoder], sentences: dict[int, int], rounds: int) -> list[dict]:
    """A row per decoder and batch size: sentences/s (median of ``rounds`` interleaved rounds after
    a warm-up on the first batches), the BLEU of the outputs timed, the MFLOP a sentence of that
    decoding (counted after the timing) and its effective GFLOP/s."""
    sp, rows = own_inputs.sentencepiece(), []
    for bsz, n in sentences.items():
        refs = own_inputs.references(n)
        inputs = [dec.batches(bsz, n) for dec in decoders]
        outputs: dict = {}
        fns = {
            i: (lambda i=i: outputs.__setitem__(i, decoders[i].decode(inputs[i])))
            for i in range(len(decoders))
        }
        for i, dec in enumerate(decoders):  # warm-up: the first 4 batches of each
            dec.decode(inputs[i][:4])
        before = common.load_average()
        with torch.no_grad():
            secs = common.interleaved_medians(fns, reps=rounds, device="cpu", warmup=0)
        after = common.load_average()
        note = common.load_note(before, after, "cpu")
        for i, dec in enumerate(decoders):
            mflop = dec.flops(bsz, n) / 1e6
            rows.append(
                {
                    "model": dec.model,
                    "engine": dec.engine,
                    "setting": dec.setting,
                    "batch": bsz,
                    "sentences": n,
                    "sentences_per_s": round(n / secs[i], 2),
                    "bleu": round(bleu(outputs[i], refs, sp), 2),
                    "mflop_per_sentence": round(mflop, 1),
                    "gflop_per_s": round(mflop * n / secs[i] / 1000, 1),
                    "load_before": round(before, 2),
                    "load_after": round(after, 2),
                    "note": note,
                }
            )
        print(
            f"frontier     batch {bsz}: {len(decoders)} decoders timed on {n} sentences "
            f"(load {before:.2f} -> {after:.2f})",
            flush=True,
        )
    return rows


def whole_sample_quality(decoders: list[Decoder], n: int) -> dict[str, float]:
    """BLEU on the first ``n`` sentences of the sample (batch 64), by ``model: engine, setting``."""
    sp, refs = own_inputs.sentencepiece(), own_inputs.references(n)
    with torch.no_grad():
        return {
            f"{d.model}: {d.engine}, {d.setting}": round(
                bleu(d.decode(d.batches(64, n)), refs, sp), 2
            )
            for d in decoders
        }


def _is(row: dict, engine: str, setting: str, model: str = "teacher 3+3") -> bool:
    return row["model"] == model and row["engine"].startswith(engine) and row["setting"] == setting


def goals(rows: list[dict], quality: dict[str, float]) -> dict[str, float]:
    """The metrics of ``GOALS``: per batch size, the sentences/s of the fastest mask-predict setting
    whose BLEU is no lower than CTranslate2 int8 beam 5's, over that row's (0.0 when none is); the
    teacher's beam-5 BLEU minus the student's best on the whole sample."""
    metrics = {}
    for bsz in SENTENCES:
        ct2 = [r for r in rows if r["batch"] == bsz and _is(r, "CTranslate2", "int8, beam 5")]
        if not ct2:
            continue
        ok = [
            r["sentences_per_s"]
            for r in rows
            if r["batch"] == bsz and "mask-predict" in r["engine"] and r["bleu"] >= ct2[0]["bleu"]
        ]
        metrics[f"maskpredict_over_ct2_int8_beam5_b{bsz}"] = round(
            max(ok, default=0.0) / ct2[0]["sentences_per_s"], 3
        )
    teacher = [v for k, v in quality.items() if k.startswith("teacher 3+3: fairseq")]
    student = [v for k, v in quality.items() if k.startswith("student")]
    if teacher and student:
        metrics["student_gap_to_teacher_bleu"] = round(teacher[0] - max(student), 2)
    return metrics


def run(device: str, quick: bool) -> dict:
    return common.run_on_threads(_run_all, device, quick, threads=1)


def _run_all(device: str, quick: bool) -> dict:
    logging.getLogger("fairseq").setLevel(logging.WARNING)
    require(
        device == "cpu",
        "the frontier bench runs on the CPU (one thread, as the engines are deployed there): "
        "run it with --device cpu",
    )
    sentences = QUICK_SENTENCES if quick else SENTENCES
    whole = 8 if quick else WHOLE_SAMPLE
    with tempfile.TemporaryDirectory(prefix="fairseq_ext_frontier_") as tmp:
        work = Path(tmp)
        data = own_inputs.binarise_sample(max(whole, *sentences.values()), work)
        decoders = mask_predict_decoders(
            data, [MASK_PREDICT[0], STUDENT_DEFAULT, STUDENT_BEST] if quick else MASK_PREDICT
        )
        decoders += mask_predict_decoders(
            data, MASK_PREDICT_INT8[:1] if quick else MASK_PREDICT_INT8, int8=True
        )
        skipped = []
        for name, checkpoint in TEACHERS.items():
            if checkpoint.exists():
                decoders += autoregressive_decoders(
                    name, checkpoint, data, work, ENGINES[1::3] if quick else ENGINES
                )
            else:
                skipped.append(
                    f"{name}: {checkpoint.relative_to(common.ROOT)} not found (made by "
                    f"{MADE_BY.get(name, 'examples/quickstart/pretrain.sh')})"
                )
        print(f"frontier     {len(decoders)} decoders built", flush=True)
        rows = timed_rows(decoders, sentences, QUICK_ROUNDS if quick else ROUNDS)
        quality = whole_sample_quality(
            [
                d
                for d in decoders
                if d.setting
                in (setting_name(*STUDENT_DEFAULT), setting_name(*STUDENT_BEST), "float32, beam 5")
                and d.engine
                in ("fairseq", "fairseq_ext mask-predict", "fairseq_ext mask-predict int8")
            ],
            whole,
        )
    from fairseq_ext.generation.int8 import int8_engines  # imports fairseq: after quiet.hush

    details = {
        "rows": rows,
        "whole_sample_bleu": quality,
        "whole_sample_sentences": whole,
        "student_sha256": student_digest(STUDENT),
        "skipped": skipped,
        "sentences": {str(k): v for k, v in sentences.items()},
        "rounds": QUICK_ROUNDS if quick else ROUNDS,
        "int8_engine": int8_engines(),
    }
    return {"metrics": goals(rows, quality), "details": details, "goals": GOALS}


def pareto_front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The ``(sentences/s, BLEU)`` points that no other point matches or beats on both axes (and
    beats on one), by speed: the speed-quality frontier."""
    front = [p for p in points if not any(q != p and q[0] >= p[0] and q[1] >= p[1] for q in points)]
    return sorted(set(front))


COLUMNS = [
    ("model", "model", ""),
    ("engine", "engine", ""),
    ("setting", "setting", ""),
    ("sentences/s", "sentences_per_s", ".1f"),
    ("sacreBLEU", "bleu", ".2f"),
    ("MFLOP/sentence", "mflop_per_sentence", ",.0f"),
    ("GFLOP/s", "gflop_per_s", ".1f"),
    ("frontier", "front", ""),
]


def render(result: dict) -> str:
    """The page's block: a table per batch size (the frontier's rows marked), the goals, the
    whole-sample BLEU and the student's distance from its teacher."""
    d, parts = result["details"], []
    for bsz in sorted({r["batch"] for r in d["rows"]}):
        rows = [r for r in d["rows"] if r["batch"] == bsz]
        front = set(pareto_front([(r["sentences_per_s"], r["bleu"]) for r in rows]))
        loads = f"load {rows[0]['load_before']:.2f} before, {rows[0]['load_after']:.2f} after"
        parts += [
            f"Batch {bsz}, {rows[0]['sentences']} sentences "
            f"({loads}{'; ' + rows[0]['note'] if rows[0]['note'] else ''}):",
            "",
            "| " + " | ".join(h for h, _, _ in COLUMNS) + " |",
            "|" + "---|" * len(COLUMNS),
        ]
        for r in sorted(rows, key=lambda r: -r["sentences_per_s"]):
            r = {**r, "front": "yes" if (r["sentences_per_s"], r["bleu"]) in front else ""}
            parts.append(
                "| " + " | ".join(format(r[k], f) if k in r else "" for _, k, f in COLUMNS) + " |"
            )
        parts.append("")
    m, g = result["metrics"], result.get("goals", {})
    for name, goal in g.items():
        if name in m:
            bound = float(goal.split()[-1])
            met = m[name] >= bound if goal.startswith(">=") else m[name] <= bound
            parts.append(f"- `{name}` = {m[name]} (goal {goal}: {'met' if met else 'not met'})")
    parts.append(
        f"- BLEU on the first {d['whole_sample_sentences']} sentences of the sample: "
        + "; ".join(f"{k} {v:.2f}" for k, v in d["whole_sample_bleu"].items())
    )
    parts += [f"- not measured: {s}" for s in d.get("skipped", [])]
    engine = f" (int8 packed for torch's `{d['int8_engine']}` engine)" if "int8_engine" in d else ""
    parts.append(
        f"- {result.get('hardware', '')}{engine}, {d['rounds']} interleaved rounds; student "
        f"SHA-256 `{d['student_sha256']}`"
    )
    return "\n".join(parts) + "\n"


def plot(result: dict, out: Path) -> bool:
    """BLEU against sentences/s at batch 1 and 64, a point per decoder setting, coloured by model
    and engine, the frontier drawn; False without rows."""
    rows = result.get("details", {}).get("rows", [])
    if not rows:
        return False
    import matplotlib

    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = sorted({(r["model"], r["engine"]) for r in rows})
    colours = {k: f"C{i}" for i, k in enumerate(kinds)}
    batches = sorted({r["batch"] for r in rows})
    fig, axes = plt.subplots(1, len(batches), figsize=(6 * len(batches), 4.8), squeeze=False)
    for ax, bsz in zip(axes[0], batches):
        here = [r for r in rows if r["batch"] == bsz]
        for kind in kinds:
            pts = [r for r in here if (r["model"], r["engine"]) == kind]
            if pts:
                ax.scatter(
                    [r["sentences_per_s"] for r in pts],
                    [r["bleu"] for r in pts],
                    color=colours[kind],
                    label=f"{kind[0]}, {kind[1]}",
                    s=28,
                )
            for r in pts:
                ax.annotate(
                    r["setting"].replace("passes, length beam", "p, lb").replace(", beam", " b"),
                    (r["sentences_per_s"], r["bleu"]),
                    fontsize=6,
                    xytext=(3, 2),
                    textcoords="offset points",
                )
        front = pareto_front([(r["sentences_per_s"], r["bleu"]) for r in here])
        ax.step(
            [p[0] for p in front],
            [p[1] for p in front],
            where="post",
            color="black",
            lw=0.8,
            ls="--",
            label="frontier",
        )
        ax.set_xscale("log")
        ax.set_xlabel("sentences/s (1 thread, log scale)")
        ax.set_ylabel("sacreBLEU")
        ax.set_title(f"batch {bsz}, {here[0]['sentences']} sentences")
    axes[0][0].legend(fontsize=6, loc="lower left")
    fig.tight_layout()
    fig.savefig(out, dpi=130)
    plt.close(fig)
    return True


def _decoder_runs(setting: str) -> int:
    """Full-length decoder runs a sentence of a mask-predict setting: passes x length beam."""
    passes, length_beam = re.match(r"(\d+) passes, length beam (\d+)", setting).groups()
    return int(passes) * int(length_beam)


def cost(rows: list[dict], bsz: int) -> str | None:
    """What decides the ranking at batch ``bsz`` (None without counts): the best mask-predict
    setting's arithmetic and rate beside CTranslate2's int8 greedy decoding of the teacher, and
    the decoder runs a student could afford to match that speed at the best mask-predict rate
    (MFLOP against runs fitted over the mask-predict rows: the encoder's and the length
    predictor's share once, the decoder's per run)."""
    here = [r for r in rows if r["batch"] == bsz and "mflop_per_sentence" in r]
    ours = [r for r in here if "mask-predict" in r["engine"]]
    greedy = [r for r in here if _is(r, "CTranslate2", "int8, beam 1")]
    if len(ours) < 2 or not greedy:
        return None
    best, peer = max(ours, key=lambda r: (r["bleu"], r["sentences_per_s"])), greedy[0]
    per_run, once = statistics.linear_regression(
        [_decoder_runs(r["setting"]) for r in ours], [r["mflop_per_sentence"] for r in ours]
    )
    rate = max(r["gflop_per_s"] for r in ours)
    budget = rate * 1000 / peer["sentences_per_s"]
    fewest = min(_decoder_runs(r["setting"]) for r in ours)
    fewest_bleu = max(r["bleu"] for r in ours if _decoder_runs(r["setting"]) == fewest)
    return (
        f"cost at batch {bsz}: the best mask-predict setting runs the whole decoder "
        f"{_decoder_runs(best['setting'])} times a sentence (passes x length beam), "
        f"{best['mflop_per_sentence']:,.0f} MFLOP at {best['gflop_per_s']:.1f} GFLOP/s; "
        f"CTranslate2's int8 greedy decoding of the teacher runs one cached slot a step, "
        f"{peer['mflop_per_sentence']:,.0f} MFLOP at {peer['gflop_per_s']:.1f} GFLOP/s: "
        f"{best['mflop_per_sentence'] / peer['mflop_per_sentence']:.1f}x the arithmetic at "
        f"{best['gflop_per_s'] / peer['gflop_per_s']:.2f}x the rate. At the best mask-predict "
        f"rate ({rate:.1f} GFLOP/s) its {peer['sentences_per_s']:.1f} sentences/s allow "
        f"{budget:,.0f} MFLOP a sentence: {(budget - once) / per_run:.1f} decoder runs of this "
        f"student ({per_run:.1f} MFLOP each beside {once:.1f} once), which would have to reach "
        f"its {peer['bleu']:.2f} BLEU (this student with {fewest} runs: {fewest_bleu:.2f})"
    )


def summary(result: dict) -> str:
    """The speed page's summary lines: per batch size, the best mask-predict setting beside the
    fastest autoregressive peer that is at least as good, and what the cost of each says
    (``cost``), and the goals met or not."""
    rows, lines = result["details"]["rows"], []
    for bsz in sorted({r["batch"] for r in rows}):
        here = [r for r in rows if r["batch"] == bsz]
        ours = max(
            (r for r in here if "mask-predict" in r["engine"]),
            key=lambda r: (r["bleu"], r["sentences_per_s"]),
        )
        peers = [r for r in here if "mask-predict" not in r["engine"] and r["bleu"] >= ours["bleu"]]
        peer = max(peers, key=lambda r: r["sentences_per_s"], default=None)
        said = (
            f"batch {bsz}: the best mask-predict setting "
            f"({ours['engine'].removeprefix('fairseq_ext ')}, {ours['setting']}) "
            f"{ours['sentences_per_s']:.1f} sentences/s at {ours['bleu']:.2f} BLEU"
        )
        if peer is not None:
            said += (
                f"; {peer['engine']} {peer['setting']} of the {peer['model']} "
                f"{peer['sentences_per_s']:.1f} sentences/s at {peer['bleu']:.2f} "
                f"({peer['sentences_per_s'] / ours['sentences_per_s']:.2f}x as fast at no lower "
                "BLEU)"
            )
        lines += [f"- {said}"] + [f"- {c}" for c in [cost(rows, bsz)] if c]
    m, g = result["metrics"], result["goals"]
    goals = [f"`{k}` {m[k]} (goal {g[k]})" for k in g if k in m]
    lines.append(
        f"- issue 76's goals: {'; '.join(goals)}; measured on {result.get('hardware', '')}"
    )
    return "\n".join(lines) + "\n"

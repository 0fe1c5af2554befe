"""HI-CMLM benchmarks, side by side in one process.

* ``hicmlm_train_tokens_per_s_ratio``: target tokens/s of a training step (forward, backward,
  Adam) of ``hi_cmlm_transformer`` (fence_replace) over fairseq's ``cmlm_transformer`` of the
  same size on the same batches (goal >= 0.95).
* the decoding rows of issue 41 (``details["decode_rows"]``, ``DECODE``): mask-predict of the
  shipped quickstart student (``--iter-decode-force-max-iter``) against fairseq's beam search
  of its autoregressive teacher (``TranslationTask``'s ``SequenceGenerator``, unchanged), at
  batch 1, 8, 64 and 256 (100, 128, 128 and 256 sentences of the shipped Multi30k test sample:
  whole batches), with 1, 4 and 10 decoder passes, length beam 1 and 3, teacher beam 1 and 5.
  All decodings of one batch size are timed together, interleaved on the same batches
  (``common.interleaved_medians``), each decoding once per round however many rows read it
  (a teacher's beam serves every student setting); ``--quick`` decodes fewer sentences at
  batch 1 and 64 only (``QUICK_DECODE``). A row holds both sides' sentences/s and tokens/s
  (sentencepiece pieces of the outputs), the speed-up (teacher seconds / student seconds),
  the BLEU of the outputs that were timed (sacreBLEU, detokenized with the quickstart's
  sentencepiece model, against test.de), the 1-minute load average before and after its
  batch size's timing and a note when that was above the bench's own threads (+ 0.5).
* ``maskpredict_vs_ar_speedup_b{1,64}_T{4,10}``: the speed-ups of those rows at batch 1 and
  64, T decoder passes, length beam 1, teacher beam 5; ``ar_beam5_sentences_per_s_b{1,64}``:
  the teacher's sentences/s there. Goals (``GOALS``, issue 41): >= 3 at batch 1 with 4 passes,
  >= 2 at batch 1 and >= 1.5 at batch 64 with 10.
* ``train_peak_rss_mb_{hicmlm,cmlm}`` (CPU) / ``train_peak_cuda_mb_*`` (GPU): peak memory of
  training, each model in its own process on CPU.

Batches for the training ratio use random token ids with the source/target length
distribution of the shipped sample (sentencepiece pieces), grouped to --max-tokens 4096.
"""

from __future__ import annotations

import hashlib
import itertools
import tempfile
from argparse import Namespace
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from reproduction.benchmarks import common, own_inputs
from reproduction.benchmarks.own_inputs import pieces

MODEL_DIR, SAMPLE = own_inputs.MODEL_DIR, own_inputs.SAMPLE
STUDENT, TEACHER = MODEL_DIR / "checkpoint.pt", MODEL_DIR / "teacher.pt"


@dataclass(frozen=True)
class Grid:
    """The decoding rows: every batch size (on its number of sentences, whole batches) x
    decoder passes x length beam of the student x beam of the teacher."""

    sentences: tuple[tuple[int, int], ...]  # (batch size, sentences)
    passes: tuple[int, ...]
    length_beams: tuple[int, ...]
    teacher_beams: tuple[int, ...]


DECODE = Grid(((1, 100), (8, 128), (64, 128), (256, 256)), (1, 4, 10), (1, 3), (1, 5))
QUICK_DECODE = Grid(((1, 8), (64, 64)), (1, 4, 10), (1, 3), (1, 5))
# issue 41: training at CMLM's rate; mask-predict (length beam 1) over the teacher's beam 5
GOALS = {
    "hicmlm_train_tokens_per_s_ratio": ">= 0.95",
    "maskpredict_vs_ar_speedup_b1_T4": ">= 3",
    "maskpredict_vs_ar_speedup_b1_T10": ">= 2",
    "maskpredict_vs_ar_speedup_b64_T10": ">= 1.5",
}
# the batch sizes and passes whose speed-up (length beam 1, teacher beam 5) is also a metric
METRIC_BATCHES, METRIC_PASSES = (1, 64), (4, 10)
SIZES = [
    "--encoder-layers",
    "3",
    "--decoder-layers",
    "3",
    "--encoder-embed-dim",
    "192",
    "--decoder-embed-dim",
    "192",
    "--encoder-ffn-embed-dim",
    "768",
    "--decoder-ffn-embed-dim",
    "768",
    "--encoder-attention-heads",
    "4",
    "--decoder-attention-heads",
    "4",
    "--share-all-embeddings",
]
GPU_SIZES = [
    "--encoder-layers",
    "6",
    "--decoder-layers",
    "6",
    "--encoder-embed-dim",
    "512",
    "--decoder-embed-dim",
    "512",
    "--encoder-ffn-embed-dim",
    "2048",
    "--decoder-ffn-embed-dim",
    "2048",
    "--encoder-attention-heads",
    "8",
    "--decoder-attention-heads",
    "8",
    "--share-all-embeddings",
]


def _train_args(data_dir: str, arch: str, device: str, extra: list[str]) -> list[str]:
    sizes = GPU_SIZES if device == "cuda" else SIZES
    return [
        data_dir,
        "--task",
        "cmlm_hybrid",
        "-s",
        "en",
        "-t",
        "de",
        "--arch",
        arch,
        *sizes,
        "--criterion",
        "nat_loss",
        "--label-smoothing",
        "0.1",
        "--dropout",
        "0.1",
        *extra,
    ]


def _batches(task, n_batches: int, max_tokens: int, seed: int = 0) -> list[dict]:
    """Batches of random ids with the sample's length distribution (sorted, packed by tokens)."""
    src_lines = (SAMPLE / "train.en").read_text().splitlines()
    tgt_lines = (SAMPLE / "train.de").read_text().splitlines()
    g = torch.Generator().manual_seed(seed)
    pairs = sorted(
        (int(len(s.split()) * 1.4) + 2, int(len(t.split()) * 1.5) + 2)
        for s, t in zip(src_lines, tgt_lines)
    )
    d = task.src_dict
    batches, current = [], []
    for src_len, tgt_len in pairs:
        if (
            current
            and (len(current) + 1) * max(max(s, t) for s, t in current + [(src_len, tgt_len)])
            > max_tokens
        ):
            batches.append(current)
            current = []
        current.append((src_len, tgt_len))
    batches.append(current)
    step = max(1, len(batches) // n_batches)
    out = []
    for b in batches[::step][:n_batches]:
        S, T = max(s for s, _ in b), max(t for _, t in b)
        src = torch.full((len(b), S), d.pad())
        tgt = torch.full((len(b), T), d.pad())
        for i, (s, t) in enumerate(b):
            src[i, S - s :] = torch.randint(d.nspecial, len(d), (s,), generator=g)
            src[i, S - s] = d.bos()
            src[i, -1] = d.eos()
            tgt[i, :t] = torch.randint(d.nspecial, len(d), (t,), generator=g)
            tgt[i, 0], tgt[i, t - 1] = d.bos(), d.eos()
        out.append(
            {
                "net_input": {"src_tokens": src, "src_lengths": src.ne(d.pad()).sum(1)},
                "target": tgt,
                "ntokens": int(tgt.ne(d.pad()).sum()),
                "nsentences": len(b),
            }
        )
    return out


# name -> (arch, extra arguments) of the two sides of the training ratio
SIDES = {
    "hicmlm": ("hi_cmlm_transformer_tiny", ["--hybrid-strategy", "fence_replace"]),
    "cmlm": ("cmlm_transformer", []),
}


def _side(name: str, data: str, device: str):
    """``(task, model, criterion, optimizer)`` of one side of the training ratio."""
    arch, extra = SIDES[name]
    task, model, criterion, _ = common.build(_train_args(data, arch, device, extra), device)
    return task, model, criterion, torch.optim.Adam(model.parameters(), lr=1e-4)


def _trainer_step(task, model, criterion, optimizer, batches):
    def step():
        for sample in batches:
            s = dict(sample)
            s["prev_target"] = task.inject_noise(s["target"])
            common.update(model, criterion, optimizer, s)

    return step


def train_ratio(device: str, quick: bool) -> dict:
    data = common.dummy_dictionary_dir(6000)
    torch.manual_seed(0)
    runs = {name: _side(name, data, device) for name in SIDES}
    batches = [
        common.to_device(b, device) for b in _batches(runs["cmlm"][0], 4 if quick else 8, 4096)
    ]
    tokens = sum(b["ntokens"] for b in batches)
    secs = common.interleaved_medians(
        {k: _trainer_step(*side, batches) for k, side in runs.items()},
        reps=2 if quick else 5,
        device=device,
    )
    return {
        "hicmlm_train_tokens_per_s": tokens / secs["hicmlm"],
        "cmlm_train_tokens_per_s": tokens / secs["cmlm"],
        "hicmlm_train_tokens_per_s_ratio": secs["cmlm"] / secs["hicmlm"],
    }


def _encode_test(task, n: int) -> list[torch.Tensor]:
    sp = own_inputs.sentencepiece()
    d = task.src_dict
    out = []
    for line in (SAMPLE / "test.en").read_text().splitlines()[:n]:
        ids = [d.bos()] + [d.index(p) for p in sp.encode(line, out_type=str)] + [d.eos()]
        out.append(torch.tensor(ids))
    return out


def _collate(seqs: list[torch.Tensor], pad: int) -> dict:
    S = max(len(s) for s in seqs)
    src = torch.full((len(seqs), S), pad)
    for i, s in enumerate(seqs):
        src[i, S - len(s) :] = s
    return {"net_input": {"src_tokens": src, "src_lengths": torch.tensor([len(s) for s in seqs])}}


def bleu(outputs: list[torch.Tensor], references: list[str], dictionary, sp) -> float:
    """sacreBLEU (its defaults, as ``sacrebleu REF -i HYP`` in the quickstart) of the
    hypotheses ``outputs``, detokenized by the sentencepiece model ``sp``, against
    ``references``, line for line."""
    import sacrebleu

    hypotheses = [sp.decode_pieces(pieces(t, dictionary)) for t in outputs]
    return sacrebleu.corpus_bleu(hypotheses, [references]).score


def _decoding(generator, model, batches: list[dict], outputs: dict, key) -> Callable[[], None]:
    """A timed function: ``generator`` on every batch, its best hypotheses kept in ``outputs[key]``
    in line order (a batch's ``id``)."""

    def decode():
        found = {
            int(i): hypos[0]["tokens"]
            for b in batches
            for i, hypos in zip(b["id"], generator.generate([model], b))
        }
        outputs[key] = [found[i] for i in sorted(found)]

    return decode


def _load_models(device: str, student: Path = STUDENT):
    """``(student, its task, teacher, its task)``, the shipped quickstart checkpoints on ``device``
    (``student``: another student checkpoint of the same dictionary)."""
    from fairseq import checkpoint_utils

    dict_dir = common.dummy_dictionary_dir(4)
    for lang in ("en", "de"):
        Path(dict_dir, f"dict.{lang}.txt").write_text((MODEL_DIR / "dict.txt").read_text())
    overrides = {"data": dict_dir}
    (nat,), _, nat_task = checkpoint_utils.load_model_ensemble_and_task(
        [str(student)], arg_overrides=overrides
    )
    (ar,), _, ar_task = checkpoint_utils.load_model_ensemble_and_task(
        [str(TEACHER)], arg_overrides=overrides
    )
    for m in (nat, ar):
        m.to(device).eval()
        if device == "cpu":
            m.float()
    return nat, nat_task, ar, ar_task


def decode_speed(device: str, quick: bool) -> tuple[dict, list[dict], str | None]:
    """``(metrics, rows, layout)``: the decoding rows of ``DECODE`` (``QUICK_DECODE`` with
    ``quick``), the speed-ups and teacher rates among them that are metrics, and the student's
    layout; nothing without the shipped checkpoints. Each model decodes the input its own task
    binarises (``own_inputs``: the teacher without the ``<s>`` the student's task prepends)."""
    common.load_plugin()
    if not (STUDENT.exists() and TEACHER.exists()):
        return {}, [], None
    grid = QUICK_DECODE if quick else DECODE
    with tempfile.TemporaryDirectory(prefix="fairseq_ext_bench_") as tmp:
        data = own_inputs.binarise_sample(max(n for _, n in grid.sentences), Path(tmp))
        nat, nat_task, nat_sources = own_inputs.load(STUDENT, data, device)
        ar, ar_task, ar_sources = own_inputs.load(TEACHER, data, device)
    references = own_inputs.references(max(n for _, n in grid.sentences))
    sp, d = own_inputs.sentencepiece(), nat_task.tgt_dict
    students = {
        (T, lb): nat_task.build_generator(
            [nat],
            Namespace(
                iter_decode_max_iter=T - 1,
                iter_decode_with_beam=lb,
                iter_decode_force_max_iter=True,
            ),
        )
        for T in grid.passes
        for lb in grid.length_beams
    }
    teachers = {
        tb: ar_task.build_generator([ar], Namespace(beam=tb, max_len_a=1.2, max_len_b=10))
        for tb in grid.teacher_beams
    }
    metrics, rows = {}, []
    for bsz, n in grid.sentences:
        nat_batches = [
            common.to_device(b, device) for b in own_inputs.batches(nat_task, nat_sources[:n], bsz)
        ]
        ar_batches = [
            common.to_device(b, device) for b in own_inputs.batches(ar_task, ar_sources[:n], bsz)
        ]
        outputs: dict = {}
        fns = {
            ("student", *k): _decoding(g, nat, nat_batches, outputs, ("student", *k))
            for k, g in students.items()
        }
        fns.update(
            {
                ("teacher", tb): _decoding(g, ar, ar_batches, outputs, ("teacher", tb))
                for tb, g in teachers.items()
            }
        )
        before = common.load_average()
        with torch.no_grad():
            secs = common.interleaved_medians(fns, reps=1 if quick else 3, device=device)
        after = common.load_average()
        note = common.load_note(before, after, device)
        print(
            f"hicmlm       decoding at batch {bsz} timed on {n} sentences (load {before:.2f} -> "
            f"{after:.2f})",
            flush=True,
        )
        scored = {
            key: (bleu(out, references[:n], d, sp), sum(len(pieces(t, d)) for t in out))
            for key, out in outputs.items()
        }
        for (T, lb), tb in itertools.product(students, teachers):
            s, t = ("student", T, lb), ("teacher", tb)
            rows.append(
                {
                    "batch": bsz,
                    "sentences": n,
                    "passes": T,
                    "length_beam": lb,
                    "teacher_beam": tb,
                    "student_sentences_per_s": round(n / secs[s], 2),
                    "student_tokens_per_s": round(scored[s][1] / secs[s], 1),
                    "teacher_sentences_per_s": round(n / secs[t], 2),
                    "teacher_tokens_per_s": round(scored[t][1] / secs[t], 1),
                    "teacher_input": "own",
                    "speedup": round(secs[t] / secs[s], 4),
                    "student_bleu": round(scored[s][0], 2),
                    "teacher_bleu": round(scored[t][0], 2),
                    "load_before": round(before, 2),
                    "load_after": round(after, 2),
                    "note": note,
                }
            )
        if bsz in METRIC_BATCHES and 5 in teachers:
            for T in METRIC_PASSES:
                if (T, 1) in students:
                    metrics[f"maskpredict_vs_ar_speedup_b{bsz}_T{T}"] = (
                        secs[("teacher", 5)] / secs[("student", T, 1)]
                    )
            metrics[f"ar_beam5_sentences_per_s_b{bsz}"] = n / secs[("teacher", 5)]
    return metrics, rows, student_layout(nat)


def student_digest(student: Path = STUDENT) -> str:
    """SHA-256 of the student the decoding speed was measured on (the results page says
    whether that is still the shipped one)."""
    return hashlib.sha256(student.read_bytes()).hexdigest()


def student_layout(model) -> str:
    """The student's shape as the pages write it: encoder + decoder layers x width."""
    return (
        f"{len(model.encoder.layers)}+{len(model.decoder.layers)} x "
        f"{model.encoder.embed_tokens.embedding_dim}"
    )


def _train_updates(name: str, device: str) -> None:
    """One update on each of 3 batches of the training ratio, for one side alone."""
    task, model, criterion, optimizer = _side(name, common.dummy_dictionary_dir(6000), device)
    _trainer_step(
        task,
        model,
        criterion,
        optimizer,
        [common.to_device(b, device) for b in _batches(task, 3, 4096)],
    )()


def memory(device: str) -> dict[str, float]:
    """Peak training memory of each side (``common.train_peak_memory``)."""
    return common.train_peak_memory(
        "reproduction.benchmarks.hicmlm", tuple(SIDES), _train_updates, device
    )


def run(device: str, quick: bool) -> dict:
    return common.run_on_threads(_run_all, device, quick, threads=None)


def _run_all(device: str, quick: bool) -> dict:
    train = train_ratio(device, quick)
    decode, rows, layout = decode_speed(device, quick)
    metrics = {**train, **decode, **memory(device)}
    grid = QUICK_DECODE if quick else DECODE
    details = {
        "sizes": "3+3 layers x 192 (CPU) / 6+6 x 512 (GPU), shared 6k vocabulary",
        "decode_data": "500-line shipped Multi30k test sample, the first sentences of test.en: "
        + ", ".join(f"{n} at batch {bsz}" for bsz, n in grid.sentences),
    }
    if not rows:
        details["decode"] = "skipped: examples/quickstart/model/{checkpoint,teacher}.pt not found"
    else:
        details["student_sha256"] = student_digest()
        details["student_layout"] = layout
        details["decode_rows"] = rows
    return {"metrics": metrics, "details": details, "goals": GOALS}


if __name__ == "__main__":
    common.train_one_main(
        "reproduction.benchmarks.hicmlm", tuple(SIDES), _train_updates, threads=None
    )

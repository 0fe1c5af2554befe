"""Training throughput and model FLOPs utilisation of every family beside fairseq's reference
model of the same size (``make gpu-check PART=bench``).

Every model trains through fairseq's own ``Trainer`` (``--bf16``: bfloat16 weights and
activations, float32 master weights in fairseq's ``FP16Optimizer``, Adam, clipping at 1.0) on
one batch of its task's own batching, repeated: ``WARMUP_STEPS`` untimed steps, then
``STEPS`` steps each timed between two ``torch.cuda.synchronize()`` (the median is reported),
then one step under ``FlopCounterMode`` for its FLOPs (``gpu.flops``). MFU is those FLOPs
over the median step time over the card's bf16 dense peak (``gpu.flops.BF16_DENSE_PEAKS``),
and over the rate of a large bf16 matrix product measured on the card.

The data are synthetic (speed does not depend on which tokens a model reads): a dictionary of
32,000 symbols, sentences of 63 tokens plus ``</s>``; pair models read batches of 128 pairs
(64 + 64 tokens each), UniLM 64 pairs (one 129-token stack each), masked LMs 64 blocks of
128 tokens; every step thus reads 8,192 to 16,384 tokens.

Models (ours, then the fairseq models of the same sizes):

* ``hi_cmlm_transformer_wmt_en_de``: fairseq's ``cmlm_transformer`` (``translation_lev``) and
  ``transformer_wmt_en_de``, 6+6 x 512;
* ``prophetnet_base``: fairseq's ``transformer`` at 6+6 x 768, 12 heads, FFN 3072, GELU;
* ``position_masked_roberta_base`` and ``unilm_transformer_base``: ``roberta_base`` (12 x 768).
"""

from __future__ import annotations

import gc
import random
import statistics
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import torch

from reproduction.gpu.cli import results_parser, write_json
from reproduction.gpu.data import SIZE_768, binarize_mono, binarize_pairs
from reproduction.gpu.flops import bf16_peak, count_flops, matmul_tflops, mfu

ROOT = Path(__file__).resolve().parents[2]
USER_DIR = str(ROOT / "fairseq_ext")
VOCAB = 32000
SENTENCE = 63
SENTENCES = 1024
WARMUP_STEPS = 3
STEPS = 10


@dataclass(frozen=True)
class Model:
    name: str
    data: str  # "pairs" or "mono"
    options: tuple[str, ...]  # task, architecture, criterion, batch size
    kind: str  # "seq2seq" or "encoder": which dimension options its tiny version takes


PAIRS = ("-s", "en", "-t", "de", "--batch-size", "128")
MLM = ("--tokens-per-sample", "128", "--sample-break-mode", "none", "--batch-size", "64")
MODELS = {
    m.name: m
    for m in [
        Model(
            "hi_cmlm_transformer_wmt_en_de",
            "pairs",
            (
                "--task",
                "cmlm_hybrid",
                *PAIRS,
                "--arch",
                "hi_cmlm_transformer_wmt_en_de",
                "--hybrid-strategy",
                "fence_replace",
                "--criterion",
                "nat_loss",
                "--label-smoothing",
                "0.1",
            ),
            "seq2seq",
        ),
        Model(
            "cmlm_transformer",
            "pairs",
            (
                "--task",
                "translation_lev",
                *PAIRS,
                "--noise",
                "random_mask",
                "--arch",
                "cmlm_transformer",
                "--criterion",
                "nat_loss",
                "--label-smoothing",
                "0.1",
            ),
            "seq2seq",
        ),
        Model(
            "transformer_wmt_en_de",
            "pairs",
            (
                "--task",
                "translation",
                *PAIRS,
                "--arch",
                "transformer_wmt_en_de",
                "--share-all-embeddings",
                "--criterion",
                "label_smoothed_cross_entropy",
                "--label-smoothing",
                "0.1",
            ),
            "seq2seq",
        ),
        Model(
            "prophetnet_base",
            "pairs",
            (
                "--task",
                "translation_prophetnet",
                *PAIRS,
                "--arch",
                "prophetnet_base",
                "--criterion",
                "ngram_language_loss",
                "--label-smoothing",
                "0.1",
            ),
            "seq2seq",
        ),
        Model(
            "transformer (6+6 x 768)",
            "pairs",
            (
                "--task",
                "translation",
                *PAIRS,
                "--arch",
                "transformer",
                *SIZE_768,
                "--activation-fn",
                "gelu",
                "--share-all-embeddings",
                "--criterion",
                "label_smoothed_cross_entropy",
                "--label-smoothing",
                "0.1",
            ),
            "seq2seq",
        ),
        Model(
            "position_masked_roberta_base",
            "mono",
            (
                "--task",
                "position_masked_lm",
                *MLM,
                "--arch",
                "position_masked_roberta_base",
                "--criterion",
                "position_masked_lm",
            ),
            "encoder",
        ),
        Model(
            "roberta_base",
            "mono",
            ("--task", "masked_lm", *MLM, "--arch", "roberta_base", "--criterion", "masked_lm"),
            "encoder",
        ),
        Model(
            "unilm_transformer_base",
            "pairs",
            (
                "--task",
                "unilm_seq2seq",
                "-s",
                "en",
                "-t",
                "de",
                "--batch-size",
                "64",
                "--arch",
                "unilm_transformer_base",
                "--criterion",
                "label_smoothed_cross_entropy",
                "--label-smoothing",
                "0.1",
            ),
            "encoder",
        ),
    ]
}
# ours -> the references it stands beside
GROUPS = {
    "hi_cmlm_transformer_wmt_en_de": ["cmlm_transformer", "transformer_wmt_en_de"],
    "prophetnet_base": ["transformer (6+6 x 768)"],
    "position_masked_roberta_base": ["roberta_base"],
    "unilm_transformer_base": ["roberta_base"],
}
TRAINING = (
    "--optimizer",
    "adam",
    "--adam-betas",
    "(0.9,0.98)",
    "--lr",
    "1e-4",
    "--clip-norm",
    "1.0",
    "--dropout",
    "0.1",
    "--seed",
    "1",
    "--num-workers",
    "0",
)
TINY = {
    "seq2seq": (
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
    ),
    "encoder": (
        "--encoder-layers",
        "1",
        "--encoder-embed-dim",
        "32",
        "--encoder-ffn-embed-dim",
        "64",
        "--encoder-attention-heads",
        "2",
    ),
}


def synthetic_data(work: Path, sentences: int = SENTENCES, seed: int = 0) -> dict[str, Path]:
    """Random sentences of ``SENTENCE`` symbols of a ``VOCAB``-symbol dictionary, binarized as
    pairs and as monolingual text."""
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    dictionary = work / "dict.txt"
    words = VOCAB - 4  # fairseq adds <s>, <pad>, </s>, <unk>
    dictionary.write_text("".join(f"w{i} {words - i}\n" for i in range(words)))
    for split, n in (("train", sentences), ("valid", 16)):
        for lang in ("en", "de"):
            lines = (
                " ".join(f"w{rng.randrange(words)}" for _ in range(SENTENCE)) for _ in range(n)
            )
            (work / f"{split}.{lang}").write_text("".join(line + "\n" for line in lines))
    return {
        "pairs": binarize_pairs(work / "train", work / "valid", dictionary, work / "pairs"),
        "mono": binarize_mono(work / "train.en", work / "valid.en", dictionary, work / "mono"),
    }


READ = (
    "src_tokens",
    "prev_output_tokens",
)  # what a model reads: its source and its target-side input


def read_tokens(sample: dict, pad: int) -> int:
    """Non-pad tokens the model reads."""
    return sum(int(sample["net_input"][k].ne(pad).sum()) for k in READ if k in sample["net_input"])


def read_slots(sample: dict) -> int:
    """Token slots the model reads, padding included: what its matrix products run over."""
    return sum(sample["net_input"][k].numel() for k in READ if k in sample["net_input"])


def build_trainer(model: Model, data: Path, tiny: bool, batch_size: int | None):
    """fairseq's ``Trainer`` of ``model`` on ``data`` as ``fairseq-train`` builds it, the fullest
    batch of the first epoch, the padding index and the number of parameters."""
    from fairseq import tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.trainer import Trainer

    import fairseq_ext.plugin
    from reproduction.gpu.fairseq_train import parse_training_args

    fairseq_ext.plugin.load()
    argv = [str(data), "--user-dir", USER_DIR, *model.options, *TRAINING]
    argv += [*TINY[model.kind], "--cpu"] if tiny else ["--bf16"]
    if batch_size is not None:
        argv += ["--batch-size", str(batch_size)]
    cfg = convert_namespace_to_omegaconf(parse_training_args(argv))
    torch.manual_seed(1)
    task = tasks.setup_task(cfg.task)
    network = task.build_model(cfg.model)
    trainer = Trainer(cfg, task, network, task.build_criterion(cfg.criterion))
    pad = task.source_dictionary.pad()
    # the fullest batch of the epoch (length-sorted batching puts a short last block first)
    sample = max(
        trainer.get_train_iterator(epoch=1).next_epoch_itr(shuffle=False),
        key=lambda s: read_tokens(s, pad),
    )
    return trainer, sample, pad, sum(p.numel() for p in network.parameters())


def measure(
    model: Model, data: Path, tiny: bool = False, steps: int = STEPS, batch_size: int | None = None
) -> dict:
    """Median step time, tokens, FLOPs and peak memory of one model's training step."""
    trainer, sample, pad, params = build_trainer(model, data, tiny, batch_size)
    cuda = torch.cuda.is_available() and not tiny

    def step():
        trainer.train_step([sample])

    for _ in range(WARMUP_STEPS):
        step()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(steps):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    peak_gib = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
    flops = count_flops(step)
    seconds = statistics.median(times)
    tokens = read_tokens(sample, pad)
    return {
        "model": model.name,
        "params_m": params / 1e6,
        "sentences": int(sample["nsentences"]),
        "tokens_per_step": tokens,
        "slots_per_step": read_slots(sample),
        "step_ms": seconds * 1e3,
        "tokens_per_s": tokens / seconds,
        "flops_per_step": flops,
        "tflops_per_s": flops / seconds / 1e12,
        "peak_gib": peak_gib,
    }


def run(
    results: Path,
    only: list[str],
    tiny: bool,
    steps: int,
    batch_size: int | None,
    peak_tflops: float | None,
) -> dict:
    """Measure every model of the chosen groups (each once); ``throughput.json`` is rewritten
    after each, and a model that fails gets its error in place of its numbers."""
    data = synthetic_data(results / "throughput" / "data", sentences=64 if tiny else SENTENCES)
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() and not tiny else "cpu"
    peak = (peak_tflops, "--peak-tflops") if peak_tflops else bf16_peak(device)
    measured_peak = matmul_tflops() if device != "cpu" else None
    out = {
        "device": device,
        "torch": torch.__version__,
        "precision": "float32 (a CPU smoke run)" if tiny else "bfloat16 (fairseq --bf16)",
        "peak_tflops": peak[0] if peak else None,
        "peak_source": peak[1] if peak else "unknown card",
        "measured_matmul_tflops": measured_peak,
        "flops_counted_by": "torch.utils.flop_counter.FlopCounterMode over one training step",
        "groups": {ours: [ours, *GROUPS[ours]] for ours in only},
        "models": {},
    }
    for name in dict.fromkeys(n for ours in only for n in [ours, *GROUPS[ours]]):
        try:
            row = measure(MODELS[name], data[MODELS[name].data], tiny, steps, batch_size)
        except Exception as e:  # reported in the summary; the next model still runs
            traceback.print_exc()
            row = {"model": name, "error": " ".join(f"{type(e).__name__}: {e}".split())[:500]}
        else:
            if peak:
                row["mfu_datasheet"] = mfu(row["flops_per_step"], row["step_ms"] / 1e3, peak[0])
            if measured_peak:
                row["mfu_measured_matmul"] = mfu(
                    row["flops_per_step"], row["step_ms"] / 1e3, measured_peak
                )
            print(
                f"{name:32s} {row['step_ms']:8.1f} ms/step {row['tokens_per_s']:10.0f} tokens/s "
                f"{row['tflops_per_s']:7.1f} TFLOP/s",
                flush=True,
            )
        out["models"][name] = row
        write_json(results / "throughput.json", out)
        gc.collect()  # free this model's trainer before the next one is built
        if device != "cpu":
            torch.cuda.empty_cache()
    return out


def main(argv: list[str] | None = None) -> None:
    p = results_parser("python -m reproduction.gpu.throughput", __doc__, "throughput.json")
    p.add_argument("--only", nargs="+", choices=list(GROUPS), default=list(GROUPS))
    p.add_argument(
        "--steps", type=int, default=STEPS, help=f"timed steps per model (default {STEPS})"
    )
    p.add_argument(
        "--batch-size", type=int, help="sentences or blocks per batch instead of each model's own"
    )
    p.add_argument(
        "--peak-tflops", type=float, help="the card's bf16 dense peak, for a card not listed"
    )
    p.add_argument(
        "--tiny",
        action="store_true",
        help="1-layer, 32-dim models in float32 on the CPU: a smoke run",
    )
    args = p.parse_args(argv)
    out = run(args.results, args.only, args.tiny, args.steps, args.batch_size, args.peak_tflops)
    sys.exit(1 if any("error" in row for row in out["models"].values()) else 0)


if __name__ == "__main__":
    main()

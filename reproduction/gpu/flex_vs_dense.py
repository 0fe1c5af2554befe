"""FlexAttention against the dense path on CUDA (``--attention-backend flex`` against
``dense``, ``fairseq_ext.modules.flex_attention``): speed of forward + backward, peak memory and
equal outputs at 128 / 512 / 1024 tokens, for UniLM's prefix mask (Dong et al. 2019, section
2.3; Su 2019, "Seq2Seq") and ProphetNet's n-stream self-attention (Qi et al. 2020, section
2.3, n = 2).

    python -m reproduction.gpu.flex_vs_dense --results DIR [--lengths 128,512,1024] [--batch 8]
    [--layers 4]
                                [--repeats 10]

What runs is what differs between the backends: ``--layers`` self-attention modules of the
models at base width (768, 12 heads), chained with residuals, under a mask built once per pass
as the models build it:

* ``unilm_prefix``: ``MaskedSelfAttention`` over ``T`` tokens, the first half source, the rest
  target, example ``b`` right-padded by ``8 b`` tokens. Dense: ``masking.padded_dense_mask``
  through ``scaled_dot_product_attention``; flex: ``padded_block_mask`` through compiled
  ``flex_attention``.
* ``prophetnet_ngram2``: ``NgramSelfAttention`` over the ``3 T`` rows of a ``T``-token target
  (main stream and two predicting streams), 32 buckets up to distance 128. Dense: the folded
  key mask and gathered bucket bias of ``NgramStreamTables`` (matrix products and a softmax,
  no SDPA: the folded layout gives each row its own key); flex: ``NgramStreamBlockMask``, the
  bias as a ``score_mod``.

Speed: bfloat16, the median over ``--repeats`` interleaved repeats (dense then flex, flex
then dense, ...) of one forward + backward between two ``torch.cuda.synchronize()``, after
``WARMUP`` untimed steps of each (the first flex steps compile its kernels). Memory:
``torch.cuda.max_memory_allocated`` during one step, above what was allocated before it.
Equal outputs: the outputs and the gradients of the input and of the first query projection,
both backends on the same weights and inputs, in float32 and bfloat16, within
``TOLERANCE`` relative to the norm of the dense result.

Writes ``flex_vs_dense.json`` and ``flex_vs_dense.md`` (the table, and at which lengths flex is
faster) to ``--results`` and prints the table; exits 1 when a comparison is unequal or a run
failed. Without CUDA it stops with one line.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable

import torch

from fairseq_ext.common.errors import FairseqExtError, require
from fairseq_ext.masking import ATTENTION_VARIANTS, NgramStreamTables, padded_dense_mask
from fairseq_ext.modules import MaskedSelfAttention, NgramSelfAttention
from fairseq_ext.modules.flex_attention import (
    NgramStreamBlockMask,
    check_attention_backend,
    padded_block_mask,
)
from reproduction.gpu.cli import results_parser, write_json

EMBED_DIM, HEADS = 768, 12
NGRAM, NUM_BUCKETS, MAX_DISTANCE = 2, 32, 128
WARMUP = 3
BACKENDS = ("dense", "flex")
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 3e-2}  # relative: |flex - dense| / |dense|
# one compiled flex_attention serves both cases, two dtypes and every length: room for its
# recompilations
RECOMPILE_LIMIT = 64


@dataclass
class Case:
    """One attention at one length: ``step(backend, dtype)`` runs forward + backward and returns
    what the equality check compares."""

    name: str
    tokens: int
    step: Callable[[str, torch.dtype], list]


def _chain(layers: list, x: torch.Tensor, dtype: torch.dtype, attend: Callable) -> list:
    """``x`` through the layers (in ``dtype``) with residuals, then backward of a fixed
    projection of the output; returns the output and the gradients of ``x`` and of layer 0's
    query weights, and leaves no gradient behind."""
    if layers[0].q_proj.weight.dtype != dtype:
        for layer in layers:
            layer.to(dtype)
    x = x.detach().to(dtype).requires_grad_(True)
    h = x
    for layer in layers:
        h = h + attend(layer, h)
    weights = torch.linspace(-1, 1, h.numel(), device=h.device).view_as(h)
    (h.float() * weights).sum().backward()
    out = [h.detach().float(), x.grad.float(), layers[0].q_proj.weight.grad.float()]
    for layer in layers:
        layer.zero_grad(set_to_none=True)
    return out


def unilm_prefix(tokens: int, batch: int, layers: int, device) -> Case:
    """UniLM's prefix rule with padding (``ATTENTION_VARIANTS["prefix"]``)."""
    modules = [MaskedSelfAttention(EMBED_DIM, HEADS).to(device).eval() for _ in range(layers)]
    x = torch.randn(
        batch, tokens, EMBED_DIM, device=device, generator=torch.Generator(device).manual_seed(0)
    )
    lengths = torch.tensor([max(tokens - 8 * b, 2) for b in range(batch)], device=device)
    padding = torch.arange(tokens, device=device) >= lengths.unsqueeze(1)
    segments = (torch.arange(tokens, device=device) >= tokens // 2).long().expand(batch, tokens)
    ranks = torch.arange(tokens, device=device).expand(batch, tokens)
    rule = ATTENTION_VARIANTS["prefix"].rule(segments, ranks)

    def step(backend: str, dtype: torch.dtype) -> list:
        mask = (
            padded_block_mask(rule, padding)
            if backend == "flex"
            else padded_dense_mask(rule, padding)
        )
        return _chain(modules, x, dtype, lambda layer, h: layer(h, mask)[0])

    return Case("unilm_prefix", tokens, step)


def prophetnet_ngram(tokens: int, batch: int, layers: int, device) -> Case:
    """ProphetNet's n-stream rule and bucket bias of a target numbered from the start."""
    modules = [
        NgramSelfAttention(EMBED_DIM, HEADS, NGRAM, NUM_BUCKETS).to(device).eval()
        for _ in range(layers)
    ]
    rows = (1 + NGRAM) * tokens
    x = torch.randn(
        rows, batch, EMBED_DIM, device=device, generator=torch.Generator(device).manual_seed(0)
    )
    tables = NgramStreamTables(tokens, NGRAM, NUM_BUCKETS, MAX_DISTANCE, device)
    buckets = tables.numbered_buckets(tokens)

    def step(backend: str, dtype: torch.dtype) -> list:
        mask = (
            NgramStreamBlockMask(tokens, NGRAM, device)
            if backend == "flex"
            else tables.key_mask(tokens)
        )
        return _chain(modules, x, dtype, lambda layer, h: layer(h, buckets, mask))

    return Case(f"prophetnet_ngram{NGRAM}", tokens, step)


def relative_errors(got: list, want: list) -> list[float]:
    """``|got - want| / |want|`` (Frobenius norms) of each pair of tensors."""
    return [float((g - w).norm() / w.norm().clamp(min=1e-30)) for g, w in zip(got, want)]


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def measure(case: Case, repeats: int) -> dict:
    """Equality in float32 and bfloat16, then bf16 speed and memory of both backends."""
    out = {"case": case.name, "tokens": case.tokens}
    try:
        for dtype, name in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
            errors = relative_errors(case.step("flex", dtype), case.step("dense", dtype))
            out[f"relative_error_{name}"] = max(errors)
            out[f"equal_{name}"] = max(errors) <= TOLERANCE[dtype]
        for backend in BACKENDS:
            for _ in range(WARMUP):
                case.step(backend, torch.bfloat16)
        times = {b: [] for b in BACKENDS}
        for r in range(repeats):
            for backend in BACKENDS if r % 2 == 0 else BACKENDS[::-1]:
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                case.step(backend, torch.bfloat16)
                torch.cuda.synchronize()
                times[backend].append(time.perf_counter() - t0)
        for backend in BACKENDS:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            case.step(backend, torch.bfloat16)
            torch.cuda.synchronize()
            out[backend] = {
                "ms": 1000 * statistics.median(times[backend]),
                "peak_mib": (torch.cuda.max_memory_allocated() - before) / 2**20,
            }
        out["flex_speedup"] = out["dense"]["ms"] / out["flex"]["ms"]
    except Exception as exc:  # a failed case is reported, and the others still run
        out["error"] = _one_line(exc)
    torch.cuda.empty_cache()
    return out


def flex_wins(rows: list[dict]) -> dict[str, list[int]]:
    """For each case, the lengths at which flex's median step is faster than dense's."""
    wins: dict[str, list[int]] = {}
    for row in rows:
        faster = "error" not in row and row["flex"]["ms"] < row["dense"]["ms"]
        wins.setdefault(row["case"], [])
        if faster:
            wins[row["case"]].append(row["tokens"])
    return wins


def passed(rows: list[dict]) -> bool:
    return all("error" not in r and r["equal_fp32"] and r["equal_bf16"] for r in rows)


def render(report: dict) -> str:
    """The markdown table of ``report`` and the lengths at which flex wins."""
    lines = [
        f"FlexAttention against the dense path on {report['device']} (torch {report['torch']}): "
        f"bf16 forward + backward of {report['layers']} self-attention layers at width "
        f"{EMBED_DIM}, batch {report['batch']}, median of {report['repeats']} interleaved repeats.",
        "",
        "| case | tokens | dense ms | flex ms | flex speed-up | dense peak MiB | flex peak MiB | "
        "rel. error fp32 / bf16 |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in report["rows"]:
        if "error" in r:
            lines.append(f"| {r['case']} | {r['tokens']} | failed: {r['error']} |||||||")
            continue
        equal = "" if r["equal_fp32"] and r["equal_bf16"] else " (unequal)"
        lines.append(
            f"| {r['case']} | {r['tokens']} | {r['dense']['ms']:.2f} | {r['flex']['ms']:.2f} | "
            f"{r['flex_speedup']:.2f}x | {r['dense']['peak_mib']:.0f} | "
            f"{r['flex']['peak_mib']:.0f} | {r['relative_error_fp32']:.1e} / "
            f"{r['relative_error_bf16']:.1e}{equal} |"
        )
    lines.append("")
    for case, lengths in report["flex_wins"].items():
        where = (
            f"at {', '.join(map(str, lengths))} tokens"
            if lengths
            else "at none of the lengths measured"
        )
        lines.append(f"- {case}: flex is faster {where}.")
    return "\n".join(lines) + "\n"


def lengths_arg(text: str) -> list[int]:
    values = [int(v) for v in text.split(",")]
    require(all(v >= 2 for v in values), f"--lengths must be integers >= 2, got {text}")
    return values


def main(argv: list[str] | None = None) -> None:
    p = results_parser(
        "python -m reproduction.gpu.flex_vs_dense",
        __doc__,
        "flex_vs_dense.json and flex_vs_dense.md",
    )
    p.add_argument(
        "--lengths", type=str, default="128,512,1024", help="target lengths T, comma-separated"
    )
    p.add_argument("--batch", type=int, default=8, help="examples per batch")
    p.add_argument("--layers", type=int, default=4, help="self-attention layers chained per pass")
    p.add_argument("--repeats", type=int, default=10, help="timed steps of each backend")
    args = p.parse_args(argv)
    try:
        require(
            torch.cuda.is_available(),
            "no CUDA device here (torch.cuda.is_available() is False): run it on "
            "a machine with an NVIDIA GPU (make gpu-check)",
        )
        check_attention_backend("flex")
        lengths = lengths_arg(args.lengths)
        require(
            args.batch >= 1 and args.layers >= 1 and args.repeats >= 1,
            "--batch, --layers and --repeats must be >= 1",
        )
    except FairseqExtError as e:
        sys.exit(f"flex_vs_dense: {e}")
    torch._dynamo.config.cache_size_limit = RECOMPILE_LIMIT
    device = torch.device("cuda")
    rows = []
    for tokens in lengths:
        for build in (unilm_prefix, prophetnet_ngram):
            rows.append(measure(build(tokens, args.batch, args.layers, device), args.repeats))
            print(f"flex_vs_dense: {rows[-1]}", flush=True)
    report = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "batch": args.batch,
        "layers": args.layers,
        "repeats": args.repeats,
        "tolerance": {"fp32": TOLERANCE[torch.float32], "bf16": TOLERANCE[torch.bfloat16]},
        "rows": rows,
        "flex_wins": flex_wins(rows),
        "passed": passed(rows),
    }
    args.results.mkdir(parents=True, exist_ok=True)
    write_json(args.results / "flex_vs_dense.json", report)
    table = render(report)
    (args.results / "flex_vs_dense.md").write_text(table)
    print(table)
    sys.exit(0 if report["passed"] else 1)


if __name__ == "__main__":
    main()

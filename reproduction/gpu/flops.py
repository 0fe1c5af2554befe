"""Model FLOPs utilisation (MFU): the FLOPs a training step needs, over its time, over the GPU's
peak rate (Chowdhery et al. 2022, PaLM, appendix B, define MFU this way; they count the FLOPs
by formula, here torch counts them as the step runs).

FLOPs of one step are counted by ``torch.utils.flop_counter.FlopCounterMode`` around the
forward and backward passes: every matrix product (``mm``, ``addmm``, ``bmm``, ...) at
``2 m n k`` and the fused attention kernels of ``scaled_dot_product_attention`` on CUDA by
their matrix products. A masked attention is counted in full (the kernels compute every
score), and ProphetNet's predicting streams are counted because the model computes them. On
a CPU, torch does not count its fused attention kernel, so a CPU count misses attention.

The peak is the bfloat16 dense tensor-core rate of NVIDIA's datasheets (half the figure
printed "with sparsity"); ``matmul_tflops`` measures what a large bfloat16 matrix product
reaches on the card as found, a second, attainable reference.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

# (substring of torch.cuda.get_device_name(), bf16 dense TFLOP/s or None where not listed here,
# source); the first match wins, so the more specific names come first.
BF16_DENSE_PEAKS: list[tuple[str, float | None, str]] = [
    ("H100 NVL", None, "not listed here: pass --peak-tflops"),
    ("H100 PCIe", 756.5, "NVIDIA H100 datasheet, H100 PCIe: BF16 1,513 TFLOPS with sparsity"),
    ("H100", 989.4, "NVIDIA H100 datasheet, H100 SXM: BF16 1,979 TFLOPS with sparsity"),
    ("H200 NVL", None, "not listed here: pass --peak-tflops"),
    ("H200", 989.4, "NVIDIA H200 datasheet, H200 SXM: BF16 1,979 TFLOPS with sparsity"),
    ("A100", 312.0, "NVIDIA A100 datasheet: BF16 312 TFLOPS dense"),
]


def bf16_peak(device_name: str) -> tuple[float, str] | None:
    """``(TFLOP/s, source)`` of the card named ``device_name``, or None when not listed."""
    for key, tflops, source in BF16_DENSE_PEAKS:
        if key in device_name:
            return None if tflops is None else (tflops, source)
    return None


def count_flops(step: Callable[[], object]) -> int:
    """FLOPs that ``step()`` runs (its forward and backward passes), as torch counts them."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        step()
    return int(counter.get_total_flops())


def mfu(flops_per_step: float, seconds_per_step: float, peak_tflops: float) -> float:
    """The share of the peak rate that ``flops_per_step`` in ``seconds_per_step`` reach."""
    if seconds_per_step <= 0 or peak_tflops <= 0:
        raise ValueError(
            f"need a positive step time and peak, got {seconds_per_step} s and {peak_tflops} "
            "TFLOP/s"
        )
    return flops_per_step / seconds_per_step / (peak_tflops * 1e12)


def matmul_tflops(n: int = 8192, reps: int = 10, device: str = "cuda") -> float:
    """TFLOP/s of an ``n x n x n`` bfloat16 matrix product on random data (median of ``reps``
    timed products after three warm-ups)."""
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        a @ b
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return 2 * n**3 / sorted(times)[reps // 2] / 1e12

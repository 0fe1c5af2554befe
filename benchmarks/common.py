"""Helpers shared by the benchmarks: models built through fairseq's own task/model API,
interleaved timing, per-process peak memory."""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def interleaved_medians(fns: dict[str, Callable[[], None]], reps: int, device: str, warmup: int = 1) -> dict[str, float]:
    """Median seconds of each function, run A, B, A, B, ... so that machine load hits all alike."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            synchronize(device)
            t0 = time.perf_counter()
            fn()
            synchronize(device)
            times[name].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def dummy_dictionary_dir(size: int, langs: tuple[str, ...] = ("en", "de")) -> str:
    """A folder with fairseq dictionaries of ``size`` dummy symbols (the speed of a model does
    not depend on which symbols it reads)."""
    d = tempfile.mkdtemp(prefix="fairseq_ext_bench_")
    for lang in langs:
        with open(os.path.join(d, f"dict.{lang}.txt"), "w") as f:
            for i in range(size - 4):
                f.write(f"w{i} {size - i}\n")
    return d


def build(args_list: list[str]):
    """``(task, model, criterion, args)`` from fairseq training arguments."""
    import fairseq_ext  # noqa: F401
    from fairseq import options, tasks

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, args_list)
    task = tasks.setup_task(args)
    model = task.build_model(args)
    criterion = task.build_criterion(args)
    return task, model, criterion, args


def vm_hwm_mb() -> float:
    """Peak resident memory of this process (VmHWM), in MB. Unlike ``ru_maxrss`` of a child,
    it does not include the parent's memory at fork time."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("/proc/self/status has no VmHWM line")


def peak_rss_mb(module: str, *argv: str) -> float:
    """Peak resident memory (MB) of ``python -m module argv`` run in a child process; the child
    must print ``vm_hwm_mb()`` as its last line of output."""
    proc = subprocess.run([sys.executable, "-m", module, *argv], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"{module} {' '.join(argv)} failed: {proc.stderr[-2000:]}")
    return float(proc.stdout.strip().splitlines()[-1])


def train_peak_memory(module: str, names: tuple[str, ...], train_updates: Callable[[str, str], None],
                      device: str) -> dict[str, float]:
    """Peak training memory (MB) of each side ``name``: on CPU the VmHWM of ``python -m module
    --train-one NAME`` (a child per side, so neither side nor the timing runs count for the
    other), on CUDA the allocator's peak around ``train_updates(name, "cuda")``."""
    if device != "cuda":
        return {f"train_peak_rss_mb_{name}": round(peak_rss_mb(module, "--train-one", name), 1) for name in names}
    out = {}
    for name in names:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        train_updates(name, device)
        out[f"train_peak_cuda_mb_{name}"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    return out

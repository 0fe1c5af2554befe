"""The one harness of the benchmarks: every module builds its models, batches, timings, thread
settings and memory measurements here, so that every ratio is measured the same way.

* Timing (``interleaved_medians``): the sides of a ratio run alternately in one process on
  the same batches, in reversed order every other round (A B, B A, A B, ...), after a
  warm-up round; each side's time is its median over the rounds, so that the load of a
  shared machine and the order of the sides weigh on every side alike. On CUDA every timed
  call is synchronised before and after (``synchronize``).
* Threads (``run_on_threads``): a module may run on a fixed number of CPU threads (restored
  afterwards); its result records the processor and the thread count it ran on.
* Models (``build``): through fairseq's own option parser, task and model API, as
  ``fairseq-train`` builds them.
* Memory (``train_peak_memory``): peak memory of training each side alone: on CPU the
  VmHWM of a child process per side (``python -m MODULE --train-one SIDE``, answered by
  ``train_one_main``), on CUDA the allocator's peak above what was allocated before.
* Load (``load_average``, ``load_note``): the 1-minute load average around a measurement, and
  a note when it says that more than the benchmark's own threads (``own_threads``) ran.
"""

from __future__ import annotations

import atexit
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import torch

from fairseq_ext.analysis.hardware import cpu_name

ROOT = Path(__file__).resolve().parents[2]
USER_DIR = str(ROOT / "fairseq_ext")


def synchronize(device: str) -> None:
    """Wait for the queued kernels on CUDA (a no-op on CPU, where calls are synchronous)."""
    if device == "cuda":
        torch.cuda.synchronize()


def timed(fn: Callable[[], object], device: str) -> float:
    """Seconds that ``fn()`` takes, synchronised on CUDA before and after."""
    synchronize(device)
    t0 = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - t0


def interleaved_medians(fns: dict, reps: int, device: str, warmup: int = 1) -> dict:
    """Median seconds of each function over ``reps`` rounds after ``warmup`` untimed rounds;
    a round calls every function once, in the order of ``fns`` in even rounds and in the
    reverse order in odd ones, so that load and order hit all sides alike."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    names = list(fns)
    times: dict = {name: [] for name in names}
    for r in range(reps):
        for name in names if r % 2 == 0 else names[::-1]:
            times[name].append(timed(fns[name], device))
    return {name: statistics.median(t) for name, t in times.items()}


def share_of_time_in(
    modules: Sequence[torch.nn.Module], fn: Callable[[], object], reps: int, device: str
) -> float:
    """Share of the time of ``reps`` calls of ``fn`` spent inside the forward calls of
    ``modules`` (timed by hooks around each, synchronised on CUDA)."""
    spent = {"inside": 0.0, "started": 0.0}

    def before(module, args):
        synchronize(device)
        spent["started"] = time.perf_counter()

    def after(module, args, out):
        synchronize(device)
        spent["inside"] += time.perf_counter() - spent["started"]

    hooks = [
        h
        for m in modules
        for h in (m.register_forward_pre_hook(before), m.register_forward_hook(after))
    ]
    try:
        total = sum(timed(fn, device) for _ in range(reps))
    finally:
        for h in hooks:
            h.remove()
    return spent["inside"] / total


def hardware(device: str) -> str:
    """The GPU's name, or the processor and the number of threads torch uses now."""
    if device == "cuda":
        return torch.cuda.get_device_name(0)
    cpu = cpu_name()
    threads = torch.get_num_threads()
    return f"{cpu}, {threads} thread{'s' if threads != 1 else ''}"


@contextmanager
def cpu_threads(device: str, threads: int | None) -> Iterator[None]:
    """Run the body on ``threads`` CPU threads (None, or a CUDA device: unchanged), then
    restore the process's count."""
    before = torch.get_num_threads()
    if device == "cpu" and threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def run_on_threads(
    run_all: Callable[[str, bool], dict], device: str, quick: bool, threads: int | None
) -> dict:
    """``run_all(device, quick)`` on ``threads`` CPU threads (``cpu_threads``), its result with
    the ``hardware`` it ran on."""
    with cpu_threads(device, threads):
        result = run_all(device, quick)
        result["hardware"] = hardware(device)
    return result


def load_average() -> float:
    """The machine's 1-minute load average (``os.getloadavg``)."""
    return os.getloadavg()[0]


def own_threads(device: str) -> int:
    """Threads a benchmark keeps busy itself: torch's CPU threads, or the one host thread that
    queues the kernels on CUDA."""
    return torch.get_num_threads() if device == "cpu" else 1


def load_note(before: float, after: float, device: str) -> str:
    """``""`` when the 1-minute load averages before and after a measurement stay within the
    benchmark's own threads (+ 0.5), else a note that another job shared the cores."""
    own = own_threads(device)
    if max(before, after) <= own + 0.5:
        return ""
    return f"not quiet: above the bench's own {own} thread{'s' if own != 1 else ''} + 0.5"


def dummy_dictionary_dir(size: int, langs: tuple[str, ...] = ("en", "de")) -> str:
    """A folder with fairseq dictionaries ``dict.{lang}.txt`` (``dict.txt`` for the language
    ``""``) of ``size`` entries once fairseq adds its 4 specials (dummy symbols ``w0``, ``w1``,
    ...: the speed of a model does not depend on which symbols it reads). The folder is
    removed when this process exits."""
    d = tempfile.mkdtemp(prefix="fairseq_ext_bench_")
    atexit.register(shutil.rmtree, d, ignore_errors=True)
    for lang in langs:
        with open(os.path.join(d, f"dict.{lang}.txt" if lang else "dict.txt"), "w") as f:
            f.writelines(f"w{i} {size - i}\n" for i in range(size - 4))
    return d


def load_plugin() -> None:
    """Register the plugin with fairseq (``fairseq_ext.plugin.load``, idempotent): fairseq
    skips ``--user-dir fairseq_ext`` once the package is imported."""
    from fairseq_ext import plugin

    plugin.load()


def build(args_list: list[str], device: str = "cpu"):
    """``(task, model, criterion, args)`` from ``fairseq-train``'s arguments (the plugin's
    ``--user-dir`` is added), the model on ``device`` in training mode."""
    from fairseq import options, tasks

    load_plugin()
    args = options.parse_args_and_arch(
        options.get_training_parser(),
        ["--user-dir", USER_DIR, *args_list] + (["--cpu"] if device == "cpu" else []),
    )
    task = tasks.setup_task(args)
    model = task.build_model(args).to(device)
    model.train()
    return task, model, task.build_criterion(args), args


def to_device(sample: dict, device: str) -> dict:
    """A fairseq sample with its tensors on ``device``."""
    if device == "cpu":
        return sample
    from fairseq import utils

    return utils.move_to_cuda(sample)


def seq2seq_batches(
    dictionary,
    n_batches: int,
    bsz: int,
    src_len: tuple[int, int],
    tgt_len: tuple[int, int],
    device: str = "cpu",
    seed: int = 0,
) -> list[dict]:
    """fairseq's translation batches of random ordinary ids with lengths drawn from
    ``[lo, hi]``: sources ``w.. </s>`` left-padded, targets ``w.. </s>`` right-padded, the
    decoder input ``</s> w..`` (the target shifted right)."""
    d = dictionary
    g = torch.Generator().manual_seed(seed)
    out = []
    for b in range(n_batches):
        s_lens = torch.randint(src_len[0], src_len[1] + 1, (bsz,), generator=g).tolist()
        t_lens = torch.randint(tgt_len[0], tgt_len[1] + 1, (bsz,), generator=g).tolist()
        S, T = max(s_lens), max(t_lens)
        src = torch.full((bsz, S), d.pad())
        tgt = torch.full((bsz, T), d.pad())
        prev = torch.full((bsz, T), d.pad())
        for i, (s, t) in enumerate(zip(s_lens, t_lens)):
            src[i, S - s :] = torch.randint(d.nspecial, len(d) - 1, (s,), generator=g)
            src[i, -1] = d.eos()
            tgt[i, :t] = torch.randint(d.nspecial, len(d) - 1, (t,), generator=g)
            tgt[i, t - 1] = d.eos()
            prev[i, 0] = d.eos()
            prev[i, 1:t] = tgt[i, : t - 1]
        out.append(
            to_device(
                {
                    "id": torch.arange(bsz) + b * bsz,
                    "nsentences": bsz,
                    "ntokens": int(tgt.ne(d.pad()).sum()),
                    "net_input": {
                        "src_tokens": src,
                        "src_lengths": src.ne(d.pad()).sum(1),
                        "prev_output_tokens": prev,
                    },
                    "target": tgt,
                },
                device,
            )
        )
    return out


def update(model, criterion, optimizer, sample: dict) -> None:
    """One training update as ``fairseq-train`` does it: forward and loss, backward, optimizer
    step."""
    optimizer.zero_grad(set_to_none=True)
    loss, _, _ = criterion(model, sample)
    loss.backward()
    optimizer.step()


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
    proc = subprocess.run(
        [sys.executable, "-m", module, *argv], capture_output=True, text=True, cwd=ROOT
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{module} {' '.join(argv)} failed: {proc.stderr[-2000:]}")
    return float(proc.stdout.strip().splitlines()[-1])


def train_peak_memory(
    module: str, names: tuple[str, ...], train_updates: Callable[[str, str], None], device: str
) -> dict[str, float]:
    """Peak training memory (MB) of each side ``name``: on CPU the VmHWM of ``python -m module
    --train-one NAME`` (a child per side, so neither side nor the timing runs count for the
    other), on CUDA the allocator's peak during ``train_updates(name, "cuda")`` above what
    was allocated before it."""
    if device != "cuda":
        return {
            f"train_peak_rss_mb_{name}": round(peak_rss_mb(module, "--train-one", name), 1)
            for name in names
        }
    out = {}
    for name in names:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        train_updates(name, device)
        synchronize(device)
        out[f"train_peak_cuda_mb_{name}"] = round(
            (torch.cuda.max_memory_allocated() - before) / 2**20, 1
        )
    return out


def train_one_main(
    module: str,
    names: tuple[str, ...],
    train_updates: Callable[[str, str], None],
    threads: int | None,
) -> None:
    """The child of ``train_peak_memory``: ``python -m module --train-one NAME`` trains side
    ``NAME`` on the CPU with ``threads`` threads (None: torch's default) and prints its
    VmHWM."""
    if len(sys.argv) == 3 and sys.argv[1] == "--train-one" and sys.argv[2] in names:
        with cpu_threads("cpu", threads):
            train_updates(sys.argv[2], "cpu")
        print(vm_hwm_mb())
    else:
        sys.exit(
            f"usage: python -m {module} --train-one {{{','.join(names)}}} (python -m "
            f"reproduction.benchmarks.run --only {module.rsplit('.', 1)[-1]} runs the benchmark)"
        )

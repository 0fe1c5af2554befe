"""Position masking benchmark, side by side in one process.

* ``posmask_train_tokens_per_s_ratio``: tokens/s of a training update of
  ``position_masked_roberta`` with position masking (task and criterion
  ``position_masked_lm``, ``--position-mask-prob 0.10``) over fairseq's ``roberta`` with
  ``masked_lm`` of the same size (goal >= 0.95). An update is what ``fairseq-train
  --num-workers 0`` does for one batch: read and mask its examples through the task's
  datasets, collate, forward, backward, Adam step.
* ``posmask_model_step_tokens_per_s_ratio``: the same without the data part (forward,
  backward and Adam on batches collated beforehand), which isolates the model and criterion.
* ``train_peak_rss_mb_{position_masked_roberta,roberta}`` (CPU; each in its own child
  process, VmHWM) / ``train_peak_cuda_mb_*`` (CUDA): peak memory of 4 training updates on
  the same batches.

Both tasks read the same binarized data (random token ids, written in process) with the
same blocks (``<s>`` + 127 tokens) and the same batches of 16 blocks, and each masks them its
own way. The steps alternate on each batch after a warm-up; a ratio is that of the summed
per-batch median times. Sizes: ``position_masked_roberta_tiny`` (2 x 128) on CPU, base
(12 x 768) on CUDA.

Quality (MLM and position accuracy of the 0/5/10/15% sweep) is not measured here: it
needs minutes of training per run; see examples/position_masking/sweep.sh and the README.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from fairseq import options, tasks, utils
from fairseq.data import indexed_dataset

import fairseq_ext  # noqa: F401  (registers the plugin)
from benchmarks.common import train_peak_memory, vm_hwm_mb
from fairseq_ext.data import NO_POSITION_LABEL

ROOT = Path(__file__).resolve().parents[1]
VOCAB = 8000
TOKENS_PER_SAMPLE = 128
BATCH = 16
CPU_SIZES = ["--encoder-layers", "2", "--encoder-embed-dim", "128", "--encoder-ffn-embed-dim", "512",
             "--encoder-attention-heads", "2"]
GPU_SIZES = ["--encoder-layers", "12", "--encoder-embed-dim", "768", "--encoder-ffn-embed-dim", "3072",
             "--encoder-attention-heads", "12"]


def _synthetic_data(n_lines: int) -> str:
    """dict.txt with VOCAB symbols and a binarized train split of random lines."""
    d = tempfile.mkdtemp(prefix="fairseq_ext_bench_")
    with open(os.path.join(d, "dict.txt"), "w") as f:
        for i in range(VOCAB - 4):
            f.write(f"w{i} {VOCAB - i}\n")
    rng = np.random.default_rng(0)
    builder = indexed_dataset.make_builder(os.path.join(d, "train.bin"), "mmap", vocab_size=VOCAB)
    for length in rng.integers(10, 60, n_lines):
        ids = np.append(rng.integers(4, VOCAB, length), 2)  # ordinary ids, then </s>
        builder.add_item(torch.from_numpy(ids.astype(np.int64)))
    builder.finalize(os.path.join(d, "train.idx"))
    return d


def _build(data: str, task: str, arch: str, criterion: str, device: str, extra: list[str]):
    args = options.parse_args_and_arch(options.get_training_parser(), [
        data, "--user-dir", str(ROOT / "fairseq_ext"), "--task", task, "--arch", arch,
        *(GPU_SIZES if device == "cuda" else CPU_SIZES), "--criterion", criterion,
        "--tokens-per-sample", str(TOKENS_PER_SAMPLE), "--sample-break-mode", "none", "--seed", "1", *extra])
    t = tasks.setup_task(args)
    t.load_dataset("train")
    model = t.build_model(args).to(device)
    model.train()
    return t, model, t.build_criterion(args)


def _index_batches(task, n_batches: int) -> list[np.ndarray]:
    itr = task.get_batch_iterator(task.dataset("train"), max_sentences=BATCH, seed=1,
                                  required_batch_size_multiple=1)
    full = [b for b in itr.frozen_batches if len(b) == BATCH]
    return full[:n_batches]


def _collate(task, indices, device: str) -> dict:
    ds = task.dataset("train")
    sample = ds.collater([ds[i] for i in indices])
    return utils.move_to_cuda(sample) if device == "cuda" else sample


def _step(model, criterion, optimizer, sample) -> None:
    optimizer.zero_grad(set_to_none=True)
    loss, _, _ = criterion(model, sample)
    loss.backward()
    optimizer.step()


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


# name -> (task, arch, criterion, extra arguments) of the two sides
SETUPS = {
    "position_masked_roberta": ("position_masked_lm", "position_masked_roberta", "position_masked_lm",
                                ["--position-mask-prob", "0.10"]),
    "roberta": ("masked_lm", "roberta", "masked_lm", []),
}
MEMORY_UPDATES = 4


def _train_updates(name: str, device: str) -> None:
    """MEMORY_UPDATES training updates of one side on fresh synthetic data."""
    task, arch, criterion, extra = SETUPS[name]
    t, model, crit = _build(_synthetic_data(n_lines=MEMORY_UPDATES * BATCH * 4), task, arch, criterion, device, extra)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    for indices in _index_batches(t, MEMORY_UPDATES):
        _step(model, crit, optimizer, _collate(t, indices, device))
    _sync(device)


def memory(device: str) -> dict[str, float]:
    """Peak training memory of each side: CUDA allocator peak, or VmHWM of a child process on CPU
    (so that neither side's memory, nor the timing runs', counts for the other)."""
    return train_peak_memory("benchmarks.posmask", tuple(SETUPS), _train_updates, device)


def run(device: str, quick: bool) -> dict:
    torch.manual_seed(0)
    n_batches, reps = (4, 3) if quick else (8, 7)
    data = _synthetic_data(n_lines=n_batches * BATCH * 4)
    runs = {name: _build(data, task, arch, criterion, device, extra)
            for name, (task, arch, criterion, extra) in SETUPS.items()}
    batches = _index_batches(runs["roberta"][0], n_batches)
    ours_batches = _index_batches(runs["position_masked_roberta"][0], n_batches)
    assert all(np.array_equal(a, b) for a, b in zip(batches, ours_batches)), "the two tasks batch differently"
    optimizers = {name: torch.optim.Adam(m.parameters(), lr=1e-4) for name, (_, m, _) in runs.items()}
    collated = {name: [_collate(t, b, device) for b in batches] for name, (t, _, _) in runs.items()}

    def update(name, i):
        t, m, c = runs[name]
        _step(m, c, optimizers[name], _collate(t, batches[i], device))

    def model_step(name, i):
        _, m, c = runs[name]
        _step(m, c, optimizers[name], collated[name][i])

    kinds = {"update": update, "model_step": model_step}
    for name in runs:  # warm-up
        for i in range(min(2, n_batches)):
            update(name, i)
    times = {(kind, name): [[] for _ in batches] for kind in kinds for name in runs}
    for _ in range(reps):
        for i in range(len(batches)):
            for kind, fn in kinds.items():
                for name in runs:
                    _sync(device)
                    t0 = time.perf_counter()
                    fn(name, i)
                    _sync(device)
                    times[kind, name][i].append(time.perf_counter() - t0)
    tokens = sum(int(s["ntokens"]) for s in collated["roberta"])
    per_s = {f"{kind}/{name}": tokens / sum(statistics.median(t) for t in ts) for (kind, name), ts in times.items()}

    def ratio(kind):
        return round(per_s[f"{kind}/position_masked_roberta"] / per_s[f"{kind}/roberta"], 3)

    return {
        "metrics": {"posmask_train_tokens_per_s_ratio": ratio("update"),
                    "posmask_model_step_tokens_per_s_ratio": ratio("model_step"),
                    "posmask_train_tokens_per_s": round(per_s["update/position_masked_roberta"], 1),
                    "roberta_train_tokens_per_s": round(per_s["update/roberta"], 1),
                    **memory(device)},
        "goals": {"posmask_train_tokens_per_s_ratio": ">= 0.95",
                  "posmask_model_step_tokens_per_s_ratio": "(without data loading; diagnostic)"},
        "details": {
            "tokens_per_s": {k: round(v, 1) for k, v in per_s.items()},
            "sizes": "12 x 768 (base)" if device == "cuda" else "2 x 128 (tiny)",
            "batches": f"{n_batches} batches of {BATCH} x {TOKENS_PER_SAMPLE} tokens, {reps} interleaved repetitions",
            "position_masked_tokens_per_batch": statistics.mean(
                int(s["position_target"].ne(NO_POSITION_LABEL).sum()) for s in collated["position_masked_roberta"]),
        },
    }


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--train-one" and sys.argv[2] in SETUPS:
        _train_updates(sys.argv[2], "cpu")
        print(vm_hwm_mb())
    else:
        sys.exit(f"usage: python -m benchmarks.posmask --train-one {{{','.join(SETUPS)}}} "
                 "(make bench runs the benchmark)")

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
own way. The steps alternate on each batch (``common.interleaved_medians``: a warm-up round,
then rounds in alternating order); a ratio is that of the summed per-batch median times. Sizes:
``position_masked_roberta_tiny`` (2 x 128) on CPU, base (12 x 768) on CUDA.

Quality (MLM and position accuracy of the 0/5/10/15% sweep) is not measured here: it
needs minutes of training per run; see reproduction/position_masking/sweep.sh and the README.
"""

from __future__ import annotations

import functools
import os
import statistics

import numpy as np
import torch

from reproduction.benchmarks import common

VOCAB = 8000
TOKENS_PER_SAMPLE = 128
BATCH = 16
CPU_SIZES = [
    "--encoder-layers",
    "2",
    "--encoder-embed-dim",
    "128",
    "--encoder-ffn-embed-dim",
    "512",
    "--encoder-attention-heads",
    "2",
]
GPU_SIZES = [
    "--encoder-layers",
    "12",
    "--encoder-embed-dim",
    "768",
    "--encoder-ffn-embed-dim",
    "3072",
    "--encoder-attention-heads",
    "12",
]


def _synthetic_data(n_lines: int) -> str:
    """dict.txt with VOCAB symbols and a binarized train split of random lines."""
    from fairseq.data import indexed_dataset

    d = common.dummy_dictionary_dir(VOCAB, langs=("",))
    rng = np.random.default_rng(0)
    builder = indexed_dataset.make_builder(os.path.join(d, "train.bin"), "mmap", vocab_size=VOCAB)
    for length in rng.integers(10, 60, n_lines):
        ids = np.append(rng.integers(4, VOCAB, length), 2)  # ordinary ids, then </s>
        builder.add_item(torch.from_numpy(ids.astype(np.int64)))
    builder.finalize(os.path.join(d, "train.idx"))
    return d


def _build(data: str, name: str, device: str):
    """``(task, model, criterion)`` of side ``name`` (``SETUPS``), the train split loaded."""
    task, arch, criterion, extra = SETUPS[name]
    t, model, crit, _ = common.build(
        [
            data,
            "--task",
            task,
            "--arch",
            arch,
            *(GPU_SIZES if device == "cuda" else CPU_SIZES),
            "--criterion",
            criterion,
            "--tokens-per-sample",
            str(TOKENS_PER_SAMPLE),
            "--sample-break-mode",
            "none",
            "--seed",
            "1",
            *extra,
        ],
        device,
    )
    t.load_dataset("train")
    return t, model, crit


def _index_batches(task, n_batches: int) -> list[np.ndarray]:
    itr = task.get_batch_iterator(
        task.dataset("train"), max_sentences=BATCH, seed=1, required_batch_size_multiple=1
    )
    full = [b for b in itr.frozen_batches if len(b) == BATCH]
    return full[:n_batches]


def _collate(task, indices, device: str) -> dict:
    ds = task.dataset("train")
    return common.to_device(ds.collater([ds[i] for i in indices]), device)


# name -> (task, arch, criterion, extra arguments) of the two sides
SETUPS = {
    "position_masked_roberta": (
        "position_masked_lm",
        "position_masked_roberta",
        "position_masked_lm",
        ["--position-mask-prob", "0.10"],
    ),
    "roberta": ("masked_lm", "roberta", "masked_lm", []),
}
MEMORY_UPDATES = 4


def _train_updates(name: str, device: str) -> None:
    """MEMORY_UPDATES training updates of one side on fresh synthetic data."""
    t, model, crit = _build(_synthetic_data(n_lines=MEMORY_UPDATES * BATCH * 4), name, device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    for indices in _index_batches(t, MEMORY_UPDATES):
        common.update(model, crit, optimizer, _collate(t, indices, device))


def memory(device: str) -> dict[str, float]:
    """Peak training memory of each side (``common.train_peak_memory``)."""
    return common.train_peak_memory(
        "reproduction.benchmarks.posmask", tuple(SETUPS), _train_updates, device
    )


def run(device: str, quick: bool) -> dict:
    return common.run_on_threads(_run_all, device, quick, threads=None)


def _run_all(device: str, quick: bool) -> dict:
    from fairseq_ext.data import NO_POSITION_LABEL

    torch.manual_seed(0)
    n_batches, reps = (4, 3) if quick else (8, 7)
    data = _synthetic_data(n_lines=n_batches * BATCH * 4)
    runs = {name: _build(data, name, device) for name in SETUPS}
    batches = _index_batches(runs["roberta"][0], n_batches)
    ours_batches = _index_batches(runs["position_masked_roberta"][0], n_batches)
    assert all(np.array_equal(a, b) for a, b in zip(batches, ours_batches)), (
        "the two tasks batch differently"
    )
    optimizers = {
        name: torch.optim.Adam(m.parameters(), lr=1e-4) for name, (_, m, _) in runs.items()
    }
    collated = {name: [_collate(t, b, device) for b in batches] for name, (t, _, _) in runs.items()}

    def update(name, i):
        t, m, c = runs[name]
        common.update(m, c, optimizers[name], _collate(t, batches[i], device))

    def model_step(name, i):
        _, m, c = runs[name]
        common.update(m, c, optimizers[name], collated[name][i])

    kinds = {"update": update, "model_step": model_step}
    # one timed call per batch, kind and side, interleaved batch by batch
    secs = common.interleaved_medians(
        {
            (i, kind, name): functools.partial(fn, name, i)
            for i in range(n_batches)
            for kind, fn in kinds.items()
            for name in runs
        },
        reps,
        device,
    )
    tokens = sum(int(s["ntokens"]) for s in collated["roberta"])
    per_s = {
        f"{kind}/{name}": tokens / sum(secs[i, kind, name] for i in range(n_batches))
        for kind in kinds
        for name in runs
    }

    def ratio(kind):
        return round(per_s[f"{kind}/position_masked_roberta"] / per_s[f"{kind}/roberta"], 3)

    return {
        "metrics": {
            "posmask_train_tokens_per_s_ratio": ratio("update"),
            "posmask_model_step_tokens_per_s_ratio": ratio("model_step"),
            "posmask_train_tokens_per_s": round(per_s["update/position_masked_roberta"], 1),
            "roberta_train_tokens_per_s": round(per_s["update/roberta"], 1),
            **memory(device),
        },
        "goals": {
            "posmask_train_tokens_per_s_ratio": ">= 0.95",
            "posmask_model_step_tokens_per_s_ratio": "(without data loading; diagnostic)",
        },
        "details": {
            "tokens_per_s": {k: round(v, 1) for k, v in per_s.items()},
            "sizes": "12 x 768 (base)" if device == "cuda" else "2 x 128 (tiny)",
            "batches": (
                f"{n_batches} batches of {BATCH} x {TOKENS_PER_SAMPLE} tokens, {reps} "
                "interleaved repetitions"
            ),
            "position_masked_tokens_per_batch": statistics.mean(
                int(s["position_target"].ne(NO_POSITION_LABEL).sum())
                for s in collated["position_masked_roberta"]
            ),
        },
    }


if __name__ == "__main__":
    common.train_one_main(
        "reproduction.benchmarks.posmask", tuple(SETUPS), _train_updates, threads=None
    )

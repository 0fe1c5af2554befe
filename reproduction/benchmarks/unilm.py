"""UniLM benchmarks, side by side in one process (models built through fairseq's own
option parser, task and model API; random token ids, since speed does not depend on them).

* ``unilm_generate_cached_vs_recompute_speedup``: sentences/s of ``fairseq-generate``'s beam
  search (beam 4, exactly 30 target tokens, Gigaword-like 40-token sources) with the cached
  decoder (one token per step against the cached source and target keys/values) over the
  same decoder re-running the whole ``<s> source </s> target`` sequence at every step, the
  bert4keras-style decoder (goal >= 3).
* ``unilm_train_tokens_per_s_ratio``: target tokens/s of a training step (forward, backward,
  Adam) of ``unilm_transformer`` (prefix mask, 8 layers) over fairseq's ``transformer``
  encoder-decoder (4 + 3 layers, shared embeddings) with about the same parameters
  (the counts are in the details), on the same batches; with both sides' target tokens/s
  and ``train_peak_rss_mb_{unilm,transformer}`` (CPU, each side alone in a child process,
  VmHWM) / ``train_peak_cuda_mb_*`` (CUDA) for 4 updates on those batches.
* ``unilm_keep_tokens_{train,decode}_speedup[_small]``: training tokens/s and beam-search
  sentences/s of a BERT-base-sized (``_small``: 4 x 256) ``unilm_transformer`` with the
  vocabulary pruned by ``--keep-tokens`` from 21128 rows (Chinese BERT's vocabulary, Su 2019's case)
  to half (Su 2019: "generally only half the original size"), over the unpruned model. The kept
  share is Su 2019's figure, not measured on a corpus; the speed-up depends only on the
  sizes.

On CPU the module runs on one thread (``CPU_THREADS``) and restores the count afterwards: on
a shared machine with two cores, two threads made every operator wait for a descheduled peer
(a base-size beam search took 4x longer than on one thread). Each ratio compares the two
sides in the same process on the same batches either way.
"""

from __future__ import annotations

import os
from typing import Callable

import torch

from reproduction.benchmarks import common

SMALL = [
    "--encoder-embed-dim",
    "256",
    "--encoder-ffn-embed-dim",
    "1024",
    "--encoder-attention-heads",
    "4",
]
CPU_THREADS = 1
BASE = [
    "--encoder-layers",
    "12",
    "--encoder-embed-dim",
    "768",
    "--encoder-ffn-embed-dim",
    "3072",
    "--encoder-attention-heads",
    "12",
]
LANGS = ("src", "tgt")


def _unilm(data: str, device: str, *extra: str):
    return common.build(
        [
            data,
            "--task",
            "unilm_seq2seq",
            "-s",
            "src",
            "-t",
            "tgt",
            "--arch",
            "unilm_transformer_tiny",
            "--criterion",
            "label_smoothed_cross_entropy",
            "--label-smoothing",
            "0.1",
            "--max-positions",
            "512",
            *extra,
        ],
        device,
    )


def _batches(
    d, n_batches: int, bsz: int, device: str, src_len: tuple[int, int] = (30, 50)
) -> list[dict]:
    """Gigaword-like pairs: sources of 30 to 50 tokens, targets of 8 to 16."""
    return common.seq2seq_batches(
        d, n_batches, bsz, src_len=src_len, tgt_len=(8, 16), device=device
    )


def _train_steps(model, criterion, batches) -> Callable[[], None]:
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-5)

    def run():
        for sample in batches:
            common.update(model, criterion, optimizer, sample)

    return run


def _generate(model, d, batches, beam: int, length: int) -> Callable[[], None]:
    from fairseq_ext.generation import UniLMSequenceGenerator

    gen = UniLMSequenceGenerator([model], d, beam_size=beam, min_len=length, max_len_b=length)

    def run():
        with torch.no_grad():
            for sample in batches:
                gen.generate(
                    [model],
                    {
                        "id": sample["id"],
                        "net_input": {
                            "src_tokens": sample["net_input"]["src_tokens"],
                            "src_lengths": sample["net_input"]["src_lengths"],
                        },
                    },
                )

    return run, gen


def _params(model) -> int:
    return sum(p.numel() for p in model.parameters())


def cached_vs_recompute(device: str, quick: bool) -> dict:
    data = common.dummy_dictionary_dir(10000, LANGS)
    torch.manual_seed(0)
    task, model, _, _ = _unilm(data, device, "--encoder-layers", "4", *SMALL)
    model.eval()
    batches = _batches(task.src_dict, 1 if quick else 2, 4, device, src_len=(40, 40))
    cached, _ = _generate(model, task.tgt_dict, batches, beam=4, length=30)
    recompute, gen = _generate(model, task.tgt_dict, batches, beam=4, length=30)
    gen.model.has_incremental = (
        False  # fairseq calls the decoder without a cache: full recomputation
    )
    secs = common.interleaved_medians(
        {"cached": cached, "recompute": recompute}, reps=1 if quick else 3, device=device
    )
    n = sum(b["nsentences"] for b in batches)
    return {
        "metrics": {
            "unilm_generate_cached_vs_recompute_speedup": secs["recompute"] / secs["cached"]
        },
        "details": {
            "cached_sentences_per_s": n / secs["cached"],
            "recompute_sentences_per_s": n / secs["recompute"],
            "setting": "beam 4, 30 target tokens, 40-token sources, 4 layers x 256, vocab 10000, "
            f"{n} sentences in batches of 4",
        },
    }


DROPOUT = ["--dropout", "0.1", "--attention-dropout", "0.1", "--activation-dropout", "0.0"]
TRANSFORMER = [
    "--task",
    "translation",
    "-s",
    "src",
    "-t",
    "tgt",
    "--arch",
    "transformer",
    "--encoder-layers",
    "4",
    "--decoder-layers",
    "3",
    "--encoder-embed-dim",
    "256",
    "--decoder-embed-dim",
    "256",
    "--encoder-ffn-embed-dim",
    "1024",
    "--decoder-ffn-embed-dim",
    "1024",
    "--encoder-attention-heads",
    "4",
    "--decoder-attention-heads",
    "4",
    "--share-all-embeddings",
    "--criterion",
    "label_smoothed_cross_entropy",
    "--label-smoothing",
    "0.1",
]
SIDES = ("unilm", "transformer")


def _train_ratio_side(name: str, data: str, device: str):
    """``(task, model, criterion)`` of one side of the training ratio: ``unilm`` (8 x 256, prefix
    mask) or ``transformer`` (4 + 3 x 256, shared embeddings), in training mode on ``device``."""
    if name == "unilm":
        task, model, criterion, _ = _unilm(data, device, "--encoder-layers", "8", *SMALL, *DROPOUT)
    else:
        task, model, criterion, _ = common.build([data, *TRANSFORMER, *DROPOUT], device)
    return task, model, criterion


def _train_updates(name: str, device: str) -> None:
    """The training ratio's batches (4 of 32 pairs), one update each, for one side alone."""
    torch.manual_seed(0)
    task, model, criterion = _train_ratio_side(
        name, common.dummy_dictionary_dir(10000, LANGS), device
    )
    _train_steps(model, criterion, _batches(task.src_dict, 4, 32, device))()


def memory(device: str) -> dict[str, float]:
    """Peak training memory of each side of the training ratio (``common.train_peak_memory``)."""
    return common.train_peak_memory("reproduction.benchmarks.unilm", SIDES, _train_updates, device)


def train_ratio(device: str, quick: bool) -> dict:
    data = common.dummy_dictionary_dir(10000, LANGS)
    torch.manual_seed(0)
    task, unilm, unilm_crit = _train_ratio_side("unilm", data, device)
    _, transformer, tr_crit = _train_ratio_side("transformer", data, device)
    batches = _batches(task.src_dict, 2 if quick else 4, 32, device)
    tokens = sum(b["ntokens"] for b in batches)
    secs = common.interleaved_medians(
        {
            "unilm": _train_steps(unilm, unilm_crit, batches),
            "transformer": _train_steps(transformer, tr_crit, batches),
        },
        reps=2 if quick else 4,
        device=device,
    )
    return {
        "metrics": {
            "unilm_train_tokens_per_s_ratio": secs["transformer"] / secs["unilm"],
            "unilm_train_target_tokens_per_s": round(tokens / secs["unilm"], 1),
            "transformer_train_target_tokens_per_s": round(tokens / secs["transformer"], 1),
            **memory(device),
        },
        "details": {
            "unilm_train_tokens_per_s": tokens / secs["unilm"],
            "transformer_train_tokens_per_s": tokens / secs["transformer"],
            "unilm_parameters": _params(unilm),
            "transformer_parameters": _params(transformer),
            "setting": "unilm 8 layers vs transformer 4+3 layers, 256 dims, FFN 1024, vocab 10000, "
            "batches of 32 pairs, sources 30-50 tokens, targets 8-16, dropout 0.1 and "
            "attention dropout 0.1 on both",
        },
    }


def _keep_tokens_at(sizes: list[str], device: str, quick: bool) -> tuple[dict, dict]:
    full_rows, kept_rows = 21128, 21128 // 2
    data = common.dummy_dictionary_dir(full_rows - 1, LANGS)  # + <mask> = 21128 rows
    keep = os.path.join(data, "keep.txt")
    with open(keep, "w") as f:
        f.writelines(f"w{i}\n" for i in range(kept_rows - 4))
    torch.manual_seed(0)
    full_task, full, full_crit, _ = _unilm(data, device, *sizes)
    pruned_task, pruned, pruned_crit, _ = _unilm(data, device, *sizes, "--keep-tokens", keep)
    if (len(full_task.src_dict), len(pruned_task.src_dict)) != (full_rows, kept_rows):
        raise RuntimeError(
            f"built {len(full_task.src_dict)} and {len(pruned_task.src_dict)} rows, "
            f"expected {full_rows} and {kept_rows}"
        )
    # the kept tokens w0 .. have the same ids in both dictionaries, so both see the same batches
    batches = _batches(pruned_task.src_dict, 1 if quick else 2, 8, device)
    tokens = sum(b["ntokens"] for b in batches)
    reps = 2 if quick else 3
    train = common.interleaved_medians(
        {
            "full": _train_steps(full, full_crit, batches),
            "pruned": _train_steps(pruned, pruned_crit, batches),
        },
        reps=reps,
        device=device,
    )
    full.eval()
    pruned.eval()
    gen_full, _ = _generate(full, full_task.tgt_dict, batches[:1], beam=4, length=30)
    gen_pruned, _ = _generate(pruned, pruned_task.tgt_dict, batches[:1], beam=4, length=30)
    decode = common.interleaved_medians(
        {"full": gen_full, "pruned": gen_pruned}, reps=reps, device=device
    )
    n = batches[0]["nsentences"]
    speedups = {
        "train": train["full"] / train["pruned"],
        "decode": decode["full"] / decode["pruned"],
    }
    return speedups, {
        "train_tokens_per_s_full": tokens / train["full"],
        "train_tokens_per_s_pruned": tokens / train["pruned"],
        "decode_sentences_per_s_full": n / decode["full"],
        "decode_sentences_per_s_pruned": n / decode["pruned"],
        "setting": f"{' '.join(sizes)}; vocabulary {full_rows} -> {kept_rows} rows, batches of "
        "8 pairs; decoding beam 4, 30 target tokens",
    }


def keep_tokens(device: str, quick: bool) -> dict:
    """At BERT-base size (Su 2019's case) and at 4 x 256, where the vocabulary-sized work
    (embedding, softmax, Adam on the rows, beam search over the vocabulary) weighs more."""
    metrics, details = {}, {}
    for name, sizes, suffix in (
        ("base", BASE, ""),
        ("small", ["--encoder-layers", "4", *SMALL], "_small"),
    ):
        speedups, details[name] = _keep_tokens_at(sizes, device, quick)
        metrics[f"unilm_keep_tokens_train_speedup{suffix}"] = speedups["train"]
        metrics[f"unilm_keep_tokens_decode_speedup{suffix}"] = speedups["decode"]
    return {"metrics": metrics, "details": details}


def run(device: str, quick: bool) -> dict:
    return common.run_on_threads(_run_all, device, quick, threads=CPU_THREADS)


def _run_all(device: str, quick: bool) -> dict:
    result = {
        "metrics": {},
        "goals": {
            "unilm_generate_cached_vs_recompute_speedup": ">= 3",
            "unilm_train_tokens_per_s_ratio": "report",
            "unilm_keep_tokens_train_speedup": "report",
            "unilm_keep_tokens_decode_speedup": "report",
            "unilm_keep_tokens_train_speedup_small": "report",
            "unilm_keep_tokens_decode_speedup_small": "report",
        },
        "details": {},
    }
    for part in (cached_vs_recompute, train_ratio, keep_tokens):
        out = part(device, quick)
        result["metrics"].update(out["metrics"])
        result["details"][part.__name__] = out["details"]
    result["details"]["threads"] = torch.get_num_threads()
    return result


if __name__ == "__main__":
    common.train_one_main(
        "reproduction.benchmarks.unilm", SIDES, _train_updates, threads=CPU_THREADS
    )

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
  vocabulary pruned by ``--keep-tokens`` from 21128 rows (Chinese BERT's vocabulary, Su 2019's case) to half
  (Su 2019: "generally only half the original size"), over the unpruned model. The kept
  share is Su 2019's figure, not measured on a corpus; the speed-up depends only on the
  sizes.

On CPU the module runs on one thread (``CPU_THREADS``) and restores the count afterwards: on
a shared machine with two cores, two threads made every operator wait for a descheduled peer
(a base-size beam search took 4x longer than on one thread). Each ratio compares the two
sides in the same process on the same batches either way.
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

import torch

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--encoder-embed-dim", "256", "--encoder-ffn-embed-dim", "1024", "--encoder-attention-heads", "4"]
CPU_THREADS = 1
BASE = ["--encoder-layers", "12", "--encoder-embed-dim", "768", "--encoder-ffn-embed-dim", "3072",
        "--encoder-attention-heads", "12"]


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def interleaved_medians(fns: dict[str, Callable[[], None]], reps: int, device: str) -> dict[str, float]:
    """Median seconds per function over ``reps`` rounds run A, B, A, B, ... after one warm-up
    round, so that the load of a shared machine hits every side alike."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            _sync(device)
            t0 = time.perf_counter()
            fn()
            _sync(device)
            times[name].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def _dictionary_dir(size: int) -> str:
    """dict.src.txt / dict.tgt.txt with ``size`` entries once fairseq adds its 4 specials."""
    d = tempfile.mkdtemp(prefix="fairseq_ext_unilm_bench_")
    for side in ("src", "tgt"):
        with open(os.path.join(d, f"dict.{side}.txt"), "w") as f:
            f.writelines(f"w{i} {size - i}\n" for i in range(size - 4))
    return d


def _build(args_list: list[str]):
    import fairseq_ext  # noqa: F401
    from fairseq import options, tasks

    args = options.parse_args_and_arch(options.get_training_parser(), args_list)
    task = tasks.setup_task(args)
    model = task.build_model(args)
    return task, model, task.build_criterion(args), args


def _unilm(data: str, device: str, *extra: str):
    return _build([data, "--user-dir", str(ROOT / "fairseq_ext"), "--task", "unilm_seq2seq", "-s", "src", "-t",
                   "tgt", "--arch", "unilm_transformer_tiny", "--criterion", "label_smoothed_cross_entropy",
                   "--label-smoothing", "0.1", "--max-positions", "512", *extra]
                  + (["--cpu"] if device == "cpu" else []))


def _batches(d, n_batches: int, bsz: int, src_len=(30, 50), tgt_len=(8, 16), seed: int = 0) -> list[dict]:
    """fairseq's seq2seq batches: sources left-padded ``w.. </s>``, targets right-padded."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n_batches):
        s_lens = torch.randint(src_len[0], src_len[1] + 1, (bsz,), generator=g).tolist()
        t_lens = torch.randint(tgt_len[0], tgt_len[1] + 1, (bsz,), generator=g).tolist()
        S, T = max(s_lens), max(t_lens)
        src = torch.full((bsz, S), d.pad())
        tgt = torch.full((bsz, T), d.pad())
        prev = torch.full((bsz, T), d.pad())
        for i, (s, t) in enumerate(zip(s_lens, t_lens)):
            src[i, S - s:] = torch.randint(d.nspecial, len(d) - 1, (s,), generator=g)
            src[i, -1] = d.eos()
            tgt[i, :t] = torch.randint(d.nspecial, len(d) - 1, (t,), generator=g)
            tgt[i, t - 1] = d.eos()
            prev[i, 0] = d.eos()
            prev[i, 1:t] = tgt[i, :t - 1]
        out.append({"id": torch.arange(bsz), "nsentences": bsz, "ntokens": int(tgt.ne(d.pad()).sum()),
                    "net_input": {"src_tokens": src, "src_lengths": src.ne(d.pad()).sum(1),
                                  "prev_output_tokens": prev}, "target": tgt})
    return out


def _to(sample: dict, device: str) -> dict:
    if device == "cpu":
        return sample
    from fairseq import utils

    return utils.move_to_cuda(sample)


def _train_steps(model, criterion, batches) -> Callable[[], None]:
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-5)

    def run():
        for sample in batches:
            loss, _, _ = criterion(model, sample)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    return run


def _generate(model, d, batches, beam: int, length: int) -> Callable[[], None]:
    from fairseq_ext.generation import UniLMSequenceGenerator

    gen = UniLMSequenceGenerator([model], d, beam_size=beam, min_len=length, max_len_b=length)

    def run():
        with torch.no_grad():
            for sample in batches:
                gen.generate([model], {"id": sample["id"], "net_input": {
                    "src_tokens": sample["net_input"]["src_tokens"], "src_lengths": sample["net_input"]["src_lengths"]}})
    return run, gen


def _params(model) -> int:
    return sum(p.numel() for p in model.parameters())


def cached_vs_recompute(device: str, quick: bool) -> dict:
    data = _dictionary_dir(10000)
    torch.manual_seed(0)
    task, model, _, _ = _unilm(data, device, "--encoder-layers", "4", *SMALL)
    model.to(device).eval()
    batches = [_to(b, device) for b in _batches(task.src_dict, 1 if quick else 2, 4, src_len=(40, 40))]
    cached, _ = _generate(model, task.tgt_dict, batches, beam=4, length=30)
    recompute, gen = _generate(model, task.tgt_dict, batches, beam=4, length=30)
    gen.model.has_incremental = False  # fairseq calls the decoder without a cache: full recomputation
    secs = interleaved_medians({"cached": cached, "recompute": recompute}, reps=1 if quick else 3, device=device)
    n = sum(b["nsentences"] for b in batches)
    return {"metrics": {"unilm_generate_cached_vs_recompute_speedup": secs["recompute"] / secs["cached"]},
            "details": {"cached_sentences_per_s": n / secs["cached"],
                        "recompute_sentences_per_s": n / secs["recompute"],
                        "setting": "beam 4, 30 target tokens, 40-token sources, 4 layers x 256, vocab 10000, "
                                   f"{n} sentences in batches of 4"}}


DROPOUT = ["--dropout", "0.1", "--attention-dropout", "0.1", "--activation-dropout", "0.0"]


def _train_ratio_side(name: str, data: str, device: str):
    """``(task, model, criterion)`` of one side of the training ratio: ``unilm`` (8 x 256, prefix
    mask) or ``transformer`` (4 + 3 x 256, shared embeddings), in training mode on ``device``."""
    if name == "unilm":
        task, model, criterion, _ = _unilm(data, device, "--encoder-layers", "8", *SMALL, *DROPOUT)
    else:
        task, model, criterion, _ = _build([
            data, "--task", "translation", "-s", "src", "-t", "tgt", "--arch", "transformer",
            "--encoder-layers", "4", "--decoder-layers", "3", "--encoder-embed-dim", "256",
            "--decoder-embed-dim", "256", "--encoder-ffn-embed-dim", "1024", "--decoder-ffn-embed-dim", "1024",
            "--encoder-attention-heads", "4", "--decoder-attention-heads", "4", "--share-all-embeddings", *DROPOUT,
            "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1"]
            + (["--cpu"] if device == "cpu" else []))
    model.to(device).train()
    return task, model, criterion


def _train_updates(name: str, device: str) -> None:
    """The training ratio's batches (4 of 32 pairs), one update each, for one side alone."""
    torch.manual_seed(0)
    task, model, criterion = _train_ratio_side(name, _dictionary_dir(10000), device)
    _train_steps(model, criterion, [_to(b, device) for b in _batches(task.src_dict, 4, 32)])()
    _sync(device)


def memory(device: str) -> dict[str, float]:
    """Peak training memory of each side of the training ratio: VmHWM of a child process per
    side on CPU, the allocator's peak on CUDA."""
    from benchmarks.common import train_peak_memory

    return train_peak_memory("benchmarks.unilm", ("unilm", "transformer"), _train_updates, device)


def train_ratio(device: str, quick: bool) -> dict:
    data = _dictionary_dir(10000)
    torch.manual_seed(0)
    task, unilm, unilm_crit = _train_ratio_side("unilm", data, device)
    _, transformer, tr_crit = _train_ratio_side("transformer", data, device)
    batches = [_to(b, device) for b in _batches(task.src_dict, 2 if quick else 4, 32)]
    tokens = sum(b["ntokens"] for b in batches)
    secs = interleaved_medians({"unilm": _train_steps(unilm, unilm_crit, batches),
                                "transformer": _train_steps(transformer, tr_crit, batches)},
                               reps=2 if quick else 4, device=device)
    return {"metrics": {"unilm_train_tokens_per_s_ratio": secs["transformer"] / secs["unilm"],
                        "unilm_train_target_tokens_per_s": round(tokens / secs["unilm"], 1),
                        "transformer_train_target_tokens_per_s": round(tokens / secs["transformer"], 1),
                        **memory(device)},
            "details": {"unilm_train_tokens_per_s": tokens / secs["unilm"],
                        "transformer_train_tokens_per_s": tokens / secs["transformer"],
                        "unilm_parameters": _params(unilm), "transformer_parameters": _params(transformer),
                        "setting": "unilm 8 layers vs transformer 4+3 layers, 256 dims, FFN 1024, vocab 10000, "
                                   "batches of 32 pairs, sources 30-50 tokens, targets 8-16, dropout 0.1 and "
                                   "attention dropout 0.1 on both"}}


def _keep_tokens_at(sizes: list[str], device: str, quick: bool) -> tuple[dict, dict]:
    full_rows, kept_rows = 21128, 21128 // 2
    data = _dictionary_dir(full_rows - 1)  # + <mask> = 21128 rows
    keep = os.path.join(data, "keep.txt")
    with open(keep, "w") as f:
        f.writelines(f"w{i}\n" for i in range(kept_rows - 4))
    torch.manual_seed(0)
    full_task, full, full_crit, _ = _unilm(data, device, *sizes)
    pruned_task, pruned, pruned_crit, _ = _unilm(data, device, *sizes, "--keep-tokens", keep)
    if (len(full_task.src_dict), len(pruned_task.src_dict)) != (full_rows, kept_rows):
        raise RuntimeError(f"built {len(full_task.src_dict)} and {len(pruned_task.src_dict)} rows, "
                           f"expected {full_rows} and {kept_rows}")
    # the kept tokens w0 .. have the same ids in both dictionaries, so both see the same batches
    batches = [_to(b, device) for b in _batches(pruned_task.src_dict, 1 if quick else 2, 8)]
    for m in (full, pruned):
        m.to(device).train()
    tokens = sum(b["ntokens"] for b in batches)
    reps = 2 if quick else 3
    train = interleaved_medians({"full": _train_steps(full, full_crit, batches),
                                 "pruned": _train_steps(pruned, pruned_crit, batches)}, reps=reps, device=device)
    full.eval()
    pruned.eval()
    gen_full, _ = _generate(full, full_task.tgt_dict, batches[:1], beam=4, length=30)
    gen_pruned, _ = _generate(pruned, pruned_task.tgt_dict, batches[:1], beam=4, length=30)
    decode = interleaved_medians({"full": gen_full, "pruned": gen_pruned}, reps=reps, device=device)
    n = batches[0]["nsentences"]
    speedups = {"train": train["full"] / train["pruned"], "decode": decode["full"] / decode["pruned"]}
    return speedups, {"train_tokens_per_s_full": tokens / train["full"],
                      "train_tokens_per_s_pruned": tokens / train["pruned"],
                      "decode_sentences_per_s_full": n / decode["full"],
                      "decode_sentences_per_s_pruned": n / decode["pruned"],
                      "setting": f"{' '.join(sizes)}; vocabulary {full_rows} -> {kept_rows} rows, batches of "
                                 "8 pairs; decoding beam 4, 30 target tokens"}


def keep_tokens(device: str, quick: bool) -> dict:
    """At BERT-base size (Su 2019's case) and at 4 x 256, where the vocabulary-sized work
    (embedding, softmax, Adam on the rows, beam search over the vocabulary) weighs more."""
    metrics, details = {}, {}
    for name, sizes, suffix in (("base", BASE, ""), ("small", ["--encoder-layers", "4", *SMALL], "_small")):
        speedups, details[name] = _keep_tokens_at(sizes, device, quick)
        metrics[f"unilm_keep_tokens_train_speedup{suffix}"] = speedups["train"]
        metrics[f"unilm_keep_tokens_decode_speedup{suffix}"] = speedups["decode"]
    return {"metrics": metrics, "details": details}


def run(device: str, quick: bool) -> dict:
    threads = torch.get_num_threads()
    if device == "cpu":
        torch.set_num_threads(CPU_THREADS)
    try:
        result = _run_all(device, quick)
    finally:
        torch.set_num_threads(threads)
    if device == "cpu":  # run.py would otherwise record the process's thread count, restored above
        from benchmarks.run import hardware

        result["hardware"] = hardware("cpu").rsplit(",", 1)[0] + f", {CPU_THREADS} thread"
    return result


def _run_all(device: str, quick: bool) -> dict:
    result = {"metrics": {}, "goals": {"unilm_generate_cached_vs_recompute_speedup": ">= 3",
                                       "unilm_train_tokens_per_s_ratio": "report",
                                       "unilm_keep_tokens_train_speedup": "report",
                                       "unilm_keep_tokens_decode_speedup": "report",
                                       "unilm_keep_tokens_train_speedup_small": "report",
                                       "unilm_keep_tokens_decode_speedup_small": "report"}, "details": {}}
    for part in (cached_vs_recompute, train_ratio, keep_tokens):
        out = part(device, quick)
        result["metrics"].update(out["metrics"])
        result["details"][part.__name__] = out["details"]
    result["details"]["threads"] = torch.get_num_threads()
    return result


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "--train-one" and sys.argv[2] in ("unilm", "transformer"):
        from benchmarks.common import vm_hwm_mb

        torch.set_num_threads(CPU_THREADS)
        _train_updates(sys.argv[2], "cpu")
        print(vm_hwm_mb())
    else:
        sys.exit("usage: python -m benchmarks.unilm --train-one {unilm,transformer} (make bench runs the benchmark)")

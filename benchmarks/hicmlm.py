"""HI-CMLM benchmarks, side by side in one process.

* ``hicmlm_train_tokens_per_s_ratio``: target tokens/s of a training step (forward, backward,
  Adam) of ``hi_cmlm_transformer`` (fence_replace) over fairseq's ``cmlm_transformer`` of the
  same size on the same batches (goal >= 0.95).
* ``maskpredict_vs_ar_speedup_b{1,64}_T{4,10}``: sentences/s of mask-predict (length beam 1,
  T decoder passes) over fairseq's autoregressive ``transformer`` of the same size with beam
  5, at batch size 1 and 64, on the shipped Multi30k test sample, with the trained quickstart
  checkpoints (the HI-CMLM student and its autoregressive teacher) so that both produce
  real-length outputs.
* ``train_peak_rss_mb_{hicmlm,cmlm}`` (CPU) / ``train_peak_cuda_mb_*`` (GPU): peak memory of
  training, each model in its own process on CPU.

Batches for the training ratio use random token ids with the source/target length
distribution of the shipped sample (sentencepiece pieces), grouped to --max-tokens 4096.
"""
from __future__ import annotations

import sys
from argparse import Namespace
from pathlib import Path

import torch

from benchmarks.common import ROOT, build, dummy_dictionary_dir, interleaved_medians, peak_rss_mb, vm_hwm_mb

MODEL_DIR = ROOT / "examples" / "quickstart" / "model"
SAMPLE = ROOT / "examples" / "quickstart" / "data"
SIZES = ["--encoder-layers", "3", "--decoder-layers", "3", "--encoder-embed-dim", "192",
         "--decoder-embed-dim", "192", "--encoder-ffn-embed-dim", "768", "--decoder-ffn-embed-dim", "768",
         "--encoder-attention-heads", "4", "--decoder-attention-heads", "4", "--share-all-embeddings"]
GPU_SIZES = ["--encoder-layers", "6", "--decoder-layers", "6", "--encoder-embed-dim", "512",
             "--decoder-embed-dim", "512", "--encoder-ffn-embed-dim", "2048", "--decoder-ffn-embed-dim", "2048",
             "--encoder-attention-heads", "8", "--decoder-attention-heads", "8", "--share-all-embeddings"]


def _train_args(data_dir: str, arch: str, device: str, extra: list[str]) -> list[str]:
    sizes = GPU_SIZES if device == "cuda" else SIZES
    return [data_dir, "--user-dir", str(ROOT / "fairseq_ext"), "--task", "cmlm_hybrid", "-s", "en", "-t", "de",
            "--arch", arch, *sizes, "--criterion", "nat_loss", "--label-smoothing", "0.1",
            "--dropout", "0.1", *extra] + (["--cpu"] if device == "cpu" else [])


def _batches(task, n_batches: int, max_tokens: int, seed: int = 0) -> list[dict]:
    """Batches of random ids with the sample's length distribution (sorted, packed by tokens)."""
    src_lines = (SAMPLE / "train.en").read_text().splitlines()
    tgt_lines = (SAMPLE / "train.de").read_text().splitlines()
    g = torch.Generator().manual_seed(seed)
    pairs = sorted((int(len(s.split()) * 1.4) + 2, int(len(t.split()) * 1.5) + 2) for s, t in zip(src_lines, tgt_lines))
    d = task.src_dict
    batches, current = [], []
    for src_len, tgt_len in pairs:
        if current and (len(current) + 1) * max(max(s, t) for s, t in current + [(src_len, tgt_len)]) > max_tokens:
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
            src[i, S - s:] = torch.randint(d.nspecial, len(d), (s,), generator=g)
            src[i, S - s] = d.bos()
            src[i, -1] = d.eos()
            tgt[i, :t] = torch.randint(d.nspecial, len(d), (t,), generator=g)
            tgt[i, 0], tgt[i, t - 1] = d.bos(), d.eos()
        out.append({"net_input": {"src_tokens": src, "src_lengths": src.ne(d.pad()).sum(1)},
                    "target": tgt, "ntokens": int(tgt.ne(d.pad()).sum()), "nsentences": len(b)})
    return out


def _to(sample: dict, device: str) -> dict:
    if device == "cpu":
        return sample
    from fairseq import utils

    return utils.move_to_cuda(sample)


def _trainer_step(task, model, criterion, optimizer, batches, device):
    def step():
        for sample in batches:
            s = dict(sample)
            s["prev_target"] = task.inject_noise(s["target"])
            loss, _, _ = criterion(model, s)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    return step


def train_ratio(device: str, quick: bool) -> dict:
    data = dummy_dictionary_dir(6000)
    torch.manual_seed(0)
    runs = {}
    for name, arch, extra in (("hicmlm", "hi_cmlm_transformer_tiny", ["--hybrid-strategy", "fence_replace"]),
                              ("cmlm", "cmlm_transformer", [])):
        task, model, criterion, _ = build(_train_args(data, arch, device, extra))
        model.to(device).train()
        runs[name] = (task, model, criterion, torch.optim.Adam(model.parameters(), lr=1e-4))
    batches = [_to(b, device) for b in _batches(runs["cmlm"][0], 4 if quick else 8, 4096)]
    tokens = sum(b["ntokens"] for b in batches)
    secs = interleaved_medians({k: _trainer_step(t, m, c, o, batches, device) for k, (t, m, c, o) in runs.items()},
                               reps=2 if quick else 5, device=device)
    return {"hicmlm_train_tokens_per_s": tokens / secs["hicmlm"], "cmlm_train_tokens_per_s": tokens / secs["cmlm"],
            "hicmlm_train_tokens_per_s_ratio": secs["cmlm"] / secs["hicmlm"]}


def _encode_test(task, n: int) -> list[dict]:
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(MODEL_DIR / "spm.model"))
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
        src[i, S - len(s):] = s
    return {"net_input": {"src_tokens": src, "src_lengths": torch.tensor([len(s) for s in seqs])}}


def decode_speed(device: str, quick: bool) -> dict:
    from fairseq import checkpoint_utils

    student, teacher = MODEL_DIR / "checkpoint.pt", MODEL_DIR / "teacher.pt"
    if not (student.exists() and teacher.exists()):
        return {}
    data = str(MODEL_DIR)
    overrides = {"data": data}
    dict_dir = dummy_dictionary_dir(4)
    for lang in ("en", "de"):
        Path(dict_dir, f"dict.{lang}.txt").write_text((MODEL_DIR / "dict.txt").read_text())
    overrides["data"] = dict_dir
    (nat,), _, nat_task = checkpoint_utils.load_model_ensemble_and_task([str(student)], arg_overrides=overrides)
    (ar,), _, ar_task = checkpoint_utils.load_model_ensemble_and_task([str(teacher)], arg_overrides=overrides)
    for m in (nat, ar):
        m.to(device).eval()
        if device == "cpu":
            m.float()
    n_sent = 40 if quick else 100
    sents = _encode_test(nat_task, max(n_sent, 128))
    pad = nat_task.src_dict.pad()
    metrics = {}
    ar_gen = ar_task.build_generator([ar], Namespace(beam=5, max_len_a=1.2, max_len_b=10))
    for bsz, n in ((1, n_sent), (64, 128)):
        batches = [_to(_collate(sents[i:i + bsz], pad), device) for i in range(0, n, bsz)]
        fns = {"ar": lambda: [ar_gen.generate([ar], b) for b in batches]}
        for T in (4, 10):
            gen = nat_task.build_generator([nat], Namespace(iter_decode_max_iter=T - 1, iter_decode_with_beam=1,
                                                            iter_decode_force_max_iter=True))
            fns[f"T{T}"] = (lambda g: (lambda: [g.generate([nat], b) for b in batches]))(gen)
        with torch.no_grad():
            secs = interleaved_medians(fns, reps=1 if quick else 3, device=device)
        for T in (4, 10):
            metrics[f"maskpredict_vs_ar_speedup_b{bsz}_T{T}"] = secs["ar"] / secs[f"T{T}"]
        metrics[f"ar_beam5_sentences_per_s_b{bsz}"] = n / secs["ar"]
    return metrics


def memory(device: str, quick: bool) -> dict:
    if device == "cuda":
        out = {}
        data = dummy_dictionary_dir(6000)
        for name, arch, extra in (("hicmlm", "hi_cmlm_transformer_tiny", ["--hybrid-strategy", "fence_replace"]),
                                  ("cmlm", "cmlm_transformer", [])):
            task, model, criterion, _ = build(_train_args(data, arch, device, extra))
            model.cuda().train()
            opt = torch.optim.Adam(model.parameters(), lr=1e-4)
            batches = [_to(b, device) for b in _batches(task, 3, 4096)]
            torch.cuda.reset_peak_memory_stats()
            _trainer_step(task, model, criterion, opt, batches, device)()
            out[f"train_peak_cuda_mb_{name}"] = torch.cuda.max_memory_allocated() / 2**20
            del model, opt
            torch.cuda.empty_cache()
        return out
    return {f"train_peak_rss_mb_{name}": peak_rss_mb("benchmarks.hicmlm", "--train-one", name)
            for name in ("hicmlm", "cmlm")}


def run(device: str, quick: bool) -> dict:
    metrics = {**train_ratio(device, quick), **decode_speed(device, quick), **memory(device, quick)}
    details = {"sizes": "3+3 layers x 192 (CPU) / 6+6 x 512 (GPU), shared 6k vocabulary",
               "decode_data": "500-line shipped Multi30k test sample (first 100 sentences at batch 1)"}
    if not any(k.startswith("maskpredict") for k in metrics):
        details["decode"] = "skipped: examples/quickstart/model/{checkpoint,teacher}.pt not found"
    return {"metrics": metrics, "details": details,
            "goals": {"hicmlm_train_tokens_per_s_ratio": ">= 0.95"}}


def _train_one(name: str) -> None:
    data = dummy_dictionary_dir(6000)
    arch, extra = (("hi_cmlm_transformer_tiny", ["--hybrid-strategy", "fence_replace"]) if name == "hicmlm"
                   else ("cmlm_transformer", []))
    task, model, criterion, _ = build(_train_args(data, arch, "cpu", extra))
    model.train()
    _trainer_step(task, model, criterion, torch.optim.Adam(model.parameters(), lr=1e-4), _batches(task, 3, 4096), "cpu")()
    print(vm_hwm_mb())


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--train-one":
        _train_one(sys.argv[2])
    else:
        sys.exit("usage: python -m benchmarks.hicmlm --train-one {hicmlm,cmlm} (make bench runs the benchmark)")

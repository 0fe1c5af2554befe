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

import hashlib
from argparse import Namespace
from pathlib import Path

import torch

from reproduction.benchmarks import common

MODEL_DIR = common.ROOT / "examples" / "quickstart" / "model"
SAMPLE = common.ROOT / "examples" / "quickstart" / "data"
# (batch size, sentences) of the decoding speed-ups, and with --quick
DECODE, QUICK_DECODE = ((1, 100), (64, 128)), ((1, 40), (64, 128))
SIZES = ["--encoder-layers", "3", "--decoder-layers", "3", "--encoder-embed-dim", "192",
         "--decoder-embed-dim", "192", "--encoder-ffn-embed-dim", "768", "--decoder-ffn-embed-dim", "768",
         "--encoder-attention-heads", "4", "--decoder-attention-heads", "4", "--share-all-embeddings"]
GPU_SIZES = ["--encoder-layers", "6", "--decoder-layers", "6", "--encoder-embed-dim", "512",
             "--decoder-embed-dim", "512", "--encoder-ffn-embed-dim", "2048", "--decoder-ffn-embed-dim", "2048",
             "--encoder-attention-heads", "8", "--decoder-attention-heads", "8", "--share-all-embeddings"]


def _train_args(data_dir: str, arch: str, device: str, extra: list[str]) -> list[str]:
    sizes = GPU_SIZES if device == "cuda" else SIZES
    return [data_dir, "--task", "cmlm_hybrid", "-s", "en", "-t", "de", "--arch", arch, *sizes,
            "--criterion", "nat_loss", "--label-smoothing", "0.1", "--dropout", "0.1", *extra]


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


# name -> (arch, extra arguments) of the two sides of the training ratio
SIDES = {"hicmlm": ("hi_cmlm_transformer_tiny", ["--hybrid-strategy", "fence_replace"]),
         "cmlm": ("cmlm_transformer", [])}


def _side(name: str, data: str, device: str):
    """``(task, model, criterion, optimizer)`` of one side of the training ratio."""
    arch, extra = SIDES[name]
    task, model, criterion, _ = common.build(_train_args(data, arch, device, extra), device)
    return task, model, criterion, torch.optim.Adam(model.parameters(), lr=1e-4)


def _trainer_step(task, model, criterion, optimizer, batches):
    def step():
        for sample in batches:
            s = dict(sample)
            s["prev_target"] = task.inject_noise(s["target"])
            common.update(model, criterion, optimizer, s)
    return step


def train_ratio(device: str, quick: bool) -> dict:
    data = common.dummy_dictionary_dir(6000)
    torch.manual_seed(0)
    runs = {name: _side(name, data, device) for name in SIDES}
    batches = [common.to_device(b, device) for b in _batches(runs["cmlm"][0], 4 if quick else 8, 4096)]
    tokens = sum(b["ntokens"] for b in batches)
    secs = common.interleaved_medians({k: _trainer_step(*side, batches) for k, side in runs.items()},
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

    common.load_plugin()
    student, teacher = MODEL_DIR / "checkpoint.pt", MODEL_DIR / "teacher.pt"
    if not (student.exists() and teacher.exists()):
        return {}
    dict_dir = common.dummy_dictionary_dir(4)
    for lang in ("en", "de"):
        Path(dict_dir, f"dict.{lang}.txt").write_text((MODEL_DIR / "dict.txt").read_text())
    overrides = {"data": dict_dir}
    (nat,), _, nat_task = checkpoint_utils.load_model_ensemble_and_task([str(student)], arg_overrides=overrides)
    (ar,), _, ar_task = checkpoint_utils.load_model_ensemble_and_task([str(teacher)], arg_overrides=overrides)
    for m in (nat, ar):
        m.to(device).eval()
        if device == "cpu":
            m.float()
    settings = QUICK_DECODE if quick else DECODE
    sents = _encode_test(nat_task, max(n for _, n in settings))
    pad = nat_task.src_dict.pad()
    metrics = {}
    ar_gen = ar_task.build_generator([ar], Namespace(beam=5, max_len_a=1.2, max_len_b=10))
    for bsz, n in settings:
        batches = [common.to_device(_collate(sents[i:i + bsz], pad), device) for i in range(0, n, bsz)]
        fns = {"ar": lambda: [ar_gen.generate([ar], b) for b in batches]}
        for T in (4, 10):
            gen = nat_task.build_generator([nat], Namespace(iter_decode_max_iter=T - 1, iter_decode_with_beam=1,
                                                            iter_decode_force_max_iter=True))
            fns[f"T{T}"] = (lambda g: (lambda: [g.generate([nat], b) for b in batches]))(gen)
        with torch.no_grad():
            secs = common.interleaved_medians(fns, reps=1 if quick else 3, device=device)
        for T in (4, 10):
            metrics[f"maskpredict_vs_ar_speedup_b{bsz}_T{T}"] = secs["ar"] / secs[f"T{T}"]
        metrics[f"ar_beam5_sentences_per_s_b{bsz}"] = n / secs["ar"]
    return metrics


def student_digest() -> str:
    """SHA-256 of the shipped student the decoding speed was measured on (the results page says
    whether that is still the shipped one)."""
    return hashlib.sha256((MODEL_DIR / "checkpoint.pt").read_bytes()).hexdigest()


def _train_updates(name: str, device: str) -> None:
    """One update on each of 3 batches of the training ratio, for one side alone."""
    task, model, criterion, optimizer = _side(name, common.dummy_dictionary_dir(6000), device)
    _trainer_step(task, model, criterion, optimizer,
                  [common.to_device(b, device) for b in _batches(task, 3, 4096)])()


def memory(device: str) -> dict[str, float]:
    """Peak training memory of each side (``common.train_peak_memory``)."""
    return common.train_peak_memory("reproduction.benchmarks.hicmlm", tuple(SIDES), _train_updates, device)


def run(device: str, quick: bool) -> dict:
    return common.run_on_threads(_run_all, device, quick, threads=None)


def _run_all(device: str, quick: bool) -> dict:
    metrics = {**train_ratio(device, quick), **decode_speed(device, quick), **memory(device)}
    details = {"sizes": "3+3 layers x 192 (CPU) / 6+6 x 512 (GPU), shared 6k vocabulary",
               "decode_data": "500-line shipped Multi30k test sample (first 100 sentences at batch 1)"}
    if not any(k.startswith("maskpredict") for k in metrics):
        details["decode"] = "skipped: examples/quickstart/model/{checkpoint,teacher}.pt not found"
    else:
        details["student_sha256"] = student_digest()
    return {"metrics": metrics, "details": details,
            "goals": {"hicmlm_train_tokens_per_s_ratio": ">= 0.95"}}


if __name__ == "__main__":
    common.train_one_main("reproduction.benchmarks.hicmlm", tuple(SIDES), _train_updates, threads=None)

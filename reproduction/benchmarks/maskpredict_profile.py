"""Where one mask-predict decoding of the shipped student spends its time (issue 41), with
fairseq's CMLM pass and with the plugin's (``HiCMLMTransformerModel.forward_decoder``).

``python -m reproduction.benchmarks.maskpredict_profile [--passes 10] [--threads 1] [--reps 3]``
decodes the first sentences of the shipped Multi30k test sample (batch 1: 20 sentences one by
one; batch 64: 64 at once), length beam 1, ``force_max_iter`` (every sentence runs all passes,
as the bench decodes), under ``torch.profiler`` on the CPU, and prints a markdown table of each
part's milliseconds per pass and share of the decoding's CPU time (median of ``--reps``
profiles taken alternately). Parts are labelled with ``record_function`` (forward hooks on
modules, wrappers of methods), so they nest: self-/cross-attention and feed-forward lie inside
"decoder layers", inside "decoder features", inside "mask-predict pass". The profiler's own
cost inflates small ops, so the shares (not the milliseconds) are what to compare.

``--speedups`` times instead, interleaved in one process (``common.interleaved_medians``),
fairseq's pass over each variant (``VARIANTS``) at batch 1 and 64 with 4 and 10 passes.
"""
from __future__ import annotations

import argparse
import importlib
import statistics
from argparse import Namespace
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from reproduction.benchmarks import common, hicmlm

# label -> the model's modules (attribute paths) whose forward calls it covers
MODULES = {
    "encoder": ["encoder"],
    "decoder layers": ["decoder.layers"],
    "decoder self-attention": ["decoder.layers.*.self_attn"],
    "cross-attention (incl. K/V of the encoder output)": ["decoder.layers.*.encoder_attn"],
    "feed-forward": ["decoder.layers.*.fc1", "decoder.layers.*.fc2"],
    "output projection": ["decoder.output_projection"],
}
# label -> (owner, method) whose calls it covers; "model" and "decoder" are the student's
METHODS = {"length prediction": ("decoder", "forward_length"),
           "mask-predict pass": ("model", "forward_decoder"),
           "decoder features": ("decoder", "extract_features"),
           "soft copy of the source (Z)": ("decoder", "forward_copying_source")}
REMASK = ("fairseq.models.nat.cmlm_transformer", "fairseq_ext.models.hi_cmlm_transformer")


@contextmanager
def variant(model, gen, name: str):
    """Decode with one of ``VARIANTS``: "fairseq" is fairseq's CMLM pass (every slot projected
    onto the vocabulary, log_softmax, the cross-attention keys and values projected every pass),
    "masked" projects only the masked slots, "+kv" also reads the keys and values from the cache
    computed once per sentence, "+sorted" also decodes a batch as length-sorted sub-batches
    (``MaskPredictGenerator.cpu_chunk``); the last is the plugin's decoding."""
    from fairseq.models.nat import CMLMNATransformerModel

    patched = {}
    if name == "fairseq":
        patched["forward_decoder"] = partial(CMLMNATransformerModel.forward_decoder, model)
    if name in ("fairseq", "masked"):
        patched["cross_attention_cache"] = lambda encoder_out: None
    for attr, value in patched.items():
        setattr(model, attr, value)
    if not name.endswith("+sorted"):
        gen.cpu_chunk = 1 << 30
    try:
        yield
    finally:
        for attr in patched:
            delattr(model, attr)
        vars(gen).pop("cpu_chunk", None)


VARIANTS = ("fairseq", "masked", "masked+kv", "masked+kv+sorted")


def _modules(model, path: str):
    head, _, rest = path.partition(".*.")
    found = model.get_submodule(head)
    if not rest:
        return list(found) if isinstance(found, torch.nn.ModuleList) else [found]
    return [layer.get_submodule(rest) for layer in found]


def _label(stack: ExitStack, model, name: str, paths: list[str]) -> None:
    opened = []

    def enter(module, args):
        opened.append(record_function(name).__enter__())

    def leave(module, args, out):
        opened.pop().__exit__(None, None, None)

    for path in paths:
        for m in _modules(model, path):
            stack.callback(m.register_forward_pre_hook(enter).remove)
            stack.callback(m.register_forward_hook(leave).remove)


def _label_attr(stack: ExitStack, owner, attr: str, name: str) -> None:
    """Label every call of ``owner.attr`` (a method or a module's function), restored on exit."""
    own = vars(owner)
    before = own.get(attr)
    fn = getattr(owner, attr)

    def labelled(*args, **kwargs):
        with record_function(name):
            return fn(*args, **kwargs)

    setattr(owner, attr, labelled)
    stack.callback(lambda: setattr(owner, attr, before) if before is not None else delattr(owner, attr))


def load():
    """The shipped student, its task and the encoded test sentences (as the bench loads them)."""
    from fairseq import checkpoint_utils

    common.load_plugin()
    d = common.dummy_dictionary_dir(4)
    for lang in ("en", "de"):
        (Path(d) / f"dict.{lang}.txt").write_text((hicmlm.MODEL_DIR / "dict.txt").read_text())
    (model,), _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(hicmlm.MODEL_DIR / "checkpoint.pt")], arg_overrides={"data": d})
    model.eval().float()
    return model, task, hicmlm._encode_test(task, 128)


def _batches(task, sents, bsz: int, n: int) -> list[dict]:
    return [hicmlm._collate(sents[i:i + bsz], task.src_dict.pad()) for i in range(0, n, bsz)]


def _decoding(model, task, batches, passes: int):
    """The generator and a function decoding ``batches`` with it."""
    gen = task.build_generator([model], Namespace(iter_decode_max_iter=passes - 1, iter_decode_with_beam=1,
                                                  iter_decode_force_max_iter=True))
    return gen, lambda: [gen.generate([model], b) for b in batches]


def shares(model, task, sents, bsz: int, passes: int, name: str) -> dict[str, float]:
    """Milliseconds per pass of each labelled part, and of the whole decoding ("total"), with
    ``variant`` ``name``."""
    batches = _batches(task, sents, bsz, 20 if bsz == 1 else 64)
    gen, decode = _decoding(model, task, batches, passes)
    with torch.no_grad(), variant(model, gen, name):
        decode()  # warm-up
        with ExitStack() as stack:
            for label, paths in MODULES.items():
                _label(stack, model, label, paths)
            for label, (owner, attr) in METHODS.items():
                _label_attr(stack, model if owner == "model" else model.decoder, attr, label)
            for module in REMASK:
                _label_attr(stack, importlib.import_module(module), "_skeptical_unmasking", "re-masking")
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                with record_function("total"):
                    decode()
    t = {e.key: e.cpu_time_total for e in prof.key_averages()}
    out = {label: t.get(label, 0.0) for label in ["total", *MODULES, *METHODS, "re-masking"]}
    out["log_softmax or logsumexp, max, scatter"] = (out["mask-predict pass"] - out["decoder features"]
                                                      - out["output projection"] - out["re-masking"])
    out["python between passes"] = (out["total"] - out["encoder"] - out["length prediction"]
                                    - out["mask-predict pass"])
    steps = len(batches) * passes
    return {k: v / 1000 / steps for k, v in out.items()}


def speedups(model, task, sents, reps: int, sizes=((1, 40), (64, 128))) -> dict[str, float]:
    """Time of fairseq's pass over each variant's (printed as measured), interleaved in this process
    (``common.interleaved_medians``): batch 1 on 40 sentences, batch 64 on 128 (``sizes``), 10 and
    4 passes."""
    out = {}
    for bsz, n in sizes:
        batches = _batches(task, sents, bsz, n)
        for passes in (10, 4):
            gen, decode = _decoding(model, task, batches, passes)

            def run(name):
                with variant(model, gen, name):
                    decode()

            with torch.no_grad():
                secs = common.interleaved_medians({v: partial(run, v) for v in VARIANTS}, reps=reps, device="cpu")
            for v in VARIANTS[1:]:
                out[f"b{bsz} T{passes} {v}"] = secs["fairseq"] / secs[v]
                print(f"| batch {bsz}, {passes} passes | {v} | {out[f'b{bsz} T{passes} {v}']:.3f}x |", flush=True)
    return out


def profile_table(model, task, sents, bsz: int, passes: int, reps: int) -> str:
    """Markdown table of ms per pass and share of each part, fairseq's pass beside the plugin's
    ("masked+kv": the same batch, not split), each the median over ``reps`` profiles taken
    alternately."""
    runs: dict = {"fairseq": [], "masked+kv": []}
    for r in range(reps):
        for name in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
            runs[name].append(shares(model, task, sents, bsz, passes, name))
    med = {name: {k: statistics.median(x[k] for x in rs) for k in rs[0]} for name, rs in runs.items()}
    lines = [f"| batch {bsz}, {passes} passes: part | fairseq's pass, ms/pass | share "
             "| plugin's pass, ms/pass | share |", "|---|---|---|---|---|"]
    for k in med["fairseq"]:
        cells = [f"{m[k]:.2f} | {100 * m[k] / m['total']:.1f}%" for m in med.values()]
        lines.append(f"| {k} | {' | '.join(cells)} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3, help="profiles (or timing rounds) per variant")
    ap.add_argument("--speedups", action="store_true",
                    help="instead of profiling, time every variant against fairseq's pass")
    ap.add_argument("--quick", action="store_true", help="--speedups on 16 sentences at batch 1, 64 at batch 64")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model, task, sents = load()
    if a.speedups:
        print("| setting | variant | fairseq's time / variant's |\n|---|---|---|", flush=True)
        speedups(model, task, sents, a.reps, ((1, 16), (64, 64)) if a.quick else ((1, 40), (64, 128)))
        return
    for bsz in (1, 64):
        print(profile_table(model, task, sents, bsz, a.passes, a.reps) + "\n")


if __name__ == "__main__":
    main()

"""Where one mask-predict decoding of the shipped student spends its time (issue 41), per part of
fairseq's CMLM pass, and how much faster the lean loop and the CPU's length-sorted sub-batches
decode (``--speedups``).

``python -m reproduction.benchmarks.maskpredict_profile [--student CKPT] [--passes 10]
[--threads 1] [--reps 3]`` profiles ``cmlm_hybrid``'s generator over fairseq's pass (the path of
decoders the lean loop does not serve) on the first sentences of the shipped test sample (batch
1: 20 sentences one by one; batch 64: 64 at once), length beam 1, every pass run, with
``torch.profiler`` on the CPU (median of ``--reps`` profiles). Parts are labelled with
``record_function`` and nest: attention and feed-forward inside "decoder layers", inside "decoder
features", inside "mask-predict pass"; the shares, not the milliseconds, are what to compare.
``--speedups`` times each of ``VARIANTS`` against "fairseq" at batch 1 and 64, 4 and 10 passes,
interleaved in one process (``common.interleaved_medians``).

Runs are kept in ``reproduction/benchmarks/results/maskpredict_profile.json`` (per student and
kind) and drawn into the ``maskpredict-profile`` block of docs/results/speed.md (``--render``:
from the file alone); the records of issue 41 hold the plugin's former pass ("masked", "+kv").
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import time
from argparse import Namespace
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from reproduction.benchmarks import common, hicmlm
from reproduction.records import repository_path, write_json
from reproduction.results_page import write_between_markers

RESULTS = common.ROOT / "reproduction" / "benchmarks" / "results" / "maskpredict_profile.json"
PAGE = common.ROOT / "docs" / "results" / "speed.md"
START, END = "<!-- maskpredict-profile:start -->", "<!-- maskpredict-profile:end -->"
COMMAND = "python -m reproduction.benchmarks.maskpredict_profile"

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
METHODS = {
    "length prediction": ("decoder", "forward_length"),
    "mask-predict pass": ("model", "forward_decoder"),
    "decoder features": ("decoder", "extract_features"),
    "soft copy of the source (Z)": ("decoder", "forward_copying_source"),
}
REMASK = "fairseq.models.nat.cmlm_transformer"


@contextmanager
def variant(gen, name: str):
    """Decode with one of ``VARIANTS``: "fairseq" is ``cmlm_hybrid``'s generator over fairseq's
    CMLM pass (every slot projected onto the vocabulary, log_softmax, the cross-attention keys and
    values projected every pass), "lean" is ``lean_mask_predict``'s loop, and "+sorted" decodes
    a batch as length-sorted sub-batches (``MaskPredictGenerator.cpu_chunk``)."""
    gen.lean = name.startswith("lean")
    if not name.endswith("+sorted"):
        gen.cpu_chunk = 1 << 30
    try:
        yield
    finally:
        vars(gen).pop("cpu_chunk", None)


VARIANTS = ("fairseq", "fairseq+sorted", "lean", "lean+sorted")


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
    stack.callback(
        lambda: setattr(owner, attr, before) if before is not None else delattr(owner, attr)
    )


def load(student: Path = hicmlm.STUDENT):
    """The student, its task and the encoded test sentences (as the bench loads them)."""
    from fairseq import checkpoint_utils

    common.load_plugin()
    d = common.dummy_dictionary_dir(4)
    for lang in ("en", "de"):
        (Path(d) / f"dict.{lang}.txt").write_text((hicmlm.MODEL_DIR / "dict.txt").read_text())
    (model,), _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(student)], arg_overrides={"data": d}
    )
    model.eval().float()
    return model, task, hicmlm._encode_test(task, 128)


def _batches(task, sents, bsz: int, n: int) -> list[dict]:
    return [hicmlm._collate(sents[i : i + bsz], task.src_dict.pad()) for i in range(0, n, bsz)]


def _decoding(model, task, batches, passes: int):
    """The generator and a function decoding ``batches`` with it."""
    gen = task.build_generator(
        [model],
        Namespace(
            iter_decode_max_iter=passes - 1,
            iter_decode_with_beam=1,
            iter_decode_force_max_iter=True,
        ),
    )
    return gen, lambda: [gen.generate([model], b) for b in batches]


def shares(model, task, sents, bsz: int, passes: int, name: str) -> dict[str, float]:
    """Milliseconds per pass of each labelled part, and of the whole decoding ("total"), with
    ``variant`` ``name``."""
    batches = _batches(task, sents, bsz, 20 if bsz == 1 else 64)
    gen, decode = _decoding(model, task, batches, passes)
    with torch.no_grad(), variant(gen, name):
        decode()  # warm-up
        with ExitStack() as stack:
            for label, paths in MODULES.items():
                _label(stack, model, label, paths)
            for label, (owner, attr) in METHODS.items():
                _label_attr(stack, model if owner == "model" else model.decoder, attr, label)
            _label_attr(
                stack, importlib.import_module(REMASK), "_skeptical_unmasking", "re-masking"
            )
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                with record_function("total"):
                    decode()
    t = {e.key: e.cpu_time_total for e in prof.key_averages()}
    out = {label: t.get(label, 0.0) for label in ["total", *MODULES, *METHODS, "re-masking"]}
    out["log_softmax or logsumexp, max, scatter"] = (
        out["mask-predict pass"]
        - out["decoder features"]
        - out["output projection"]
        - out["re-masking"]
    )
    out["python between passes"] = (
        out["total"] - out["encoder"] - out["length prediction"] - out["mask-predict pass"]
    )
    steps = len(batches) * passes
    return {k: v / 1000 / steps for k, v in out.items()}


def speedups(model, task, sents, reps: int, sizes=((1, 40), (64, 128))) -> dict[str, float]:
    """Time of fairseq's pass over each variant's, interleaved in this process
    (``common.interleaved_medians``): batch 1 on 40 sentences, batch 64 on 128 (``sizes``), 10 and
    4 passes; keys ``"b{batch} T{passes} {variant}"``."""
    out = {}
    for bsz, n in sizes:
        batches = _batches(task, sents, bsz, n)
        for passes in (10, 4):
            gen, decode = _decoding(model, task, batches, passes)

            def run(name):
                with variant(gen, name):
                    decode()

            with torch.no_grad():
                secs = common.interleaved_medians(
                    {v: partial(run, v) for v in VARIANTS}, reps=reps, device="cpu"
                )
            for v in VARIANTS[1:]:
                out[f"b{bsz} T{passes} {v}"] = secs["fairseq"] / secs[v]
    return out


def profiles(model, task, sents, bsz: int, passes: int, reps: int) -> dict[str, dict[str, float]]:
    """Milliseconds per pass of each part of fairseq's pass, the median over ``reps`` profiles."""
    runs = [shares(model, task, sents, bsz, passes, "fairseq") for _ in range(reps)]
    return {"fairseq": {k: statistics.median(r[k] for r in runs) for k in runs[0]}}


PASSES = {"fairseq": "fairseq's pass", "plugin": "plugin's pass"}  # the columns of a profile


def profile_table(parts: dict[str, dict[str, float]], bsz: str, passes: int) -> list[str]:
    lines = [
        f"| batch {bsz}, {passes} passes: part | "
        + " | ".join(f"{PASSES[name]}, ms/pass | share" for name in parts)
        + " |",
        "|---|" + "---|---|" * len(parts),
    ]
    for k in parts["fairseq"]:
        cells = [f"{m[k]:.2f} | {100 * m[k] / m['total']:.1f}%" for m in parts.values()]
        lines.append(f"| {k} | {' | '.join(cells)} |")
    return lines


def _setting(run: dict) -> str:
    return (
        f"student {run['student_layout']} (SHA-256 {run['student_sha256'][:12]}...), "
        f"`{run['command']}`, {run['date']}, {run['hardware']}, {run['reps']} rounds; "
        f"1-minute load average {run['load_before']:.2f} before, {run['load_after']:.2f} after"
    )


def render(runs: list[dict]) -> str:
    """The ``maskpredict-profile`` block: every profile, then every table of speed-ups."""
    if not runs:
        return "No profile is recorded in the results file yet.\n"
    lines = []
    for run in (r for r in runs if r["kind"] == "profile"):
        lines += [f"Profile: {_setting(run)}.", ""]
        for bsz, parts in run["profiles"].items():
            lines += profile_table(parts, bsz, run["passes"]) + [""]
    for run in (r for r in runs if r["kind"] == "speedups"):
        lines += [
            f"Speed-ups: {_setting(run)}.",
            "",
            "| setting | variant | fairseq's time / variant's |",
            "|---|---|---|",
        ]
        for key, value in run["speedups"].items():
            setting, variant_name = key.rsplit(" ", 1)
            bsz, passes = setting.split()
            lines.append(
                f"| batch {bsz[1:]}, {passes[1:]} passes | {variant_name} | {value:.3f}x |"
            )
        lines.append("")
    return "\n".join(lines)


def keep(runs: list[dict], record: dict) -> list[dict]:
    """``runs`` with ``record`` in place of an earlier run of the same student and kind."""
    same = (record["student_sha256"], record["kind"])
    return [r for r in runs if (r["student_sha256"], r["kind"]) != same] + [record]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    ap.add_argument(
        "--student",
        type=Path,
        default=hicmlm.STUDENT,
        help="student checkpoint (default: the shipped one)",
    )
    ap.add_argument("--passes", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3, help="profiles (or timing rounds) per variant")
    ap.add_argument(
        "--speedups",
        action="store_true",
        help="instead of profiling, time every variant against fairseq's pass",
    )
    ap.add_argument(
        "--quick", action="store_true", help="--speedups on 16 sentences at batch 1, 64 at batch 64"
    )
    ap.add_argument("--out", type=Path, default=RESULTS, help="results file (default: %(default)s)")
    ap.add_argument(
        "--render", action="store_true", help="only redraw the page's block from the results file"
    )
    a = ap.parse_args(argv)
    if not a.student.is_file():
        ap.error(f"--student {a.student}: no such checkpoint")
    runs = json.loads(a.out.read_text(encoding="utf-8"))["runs"] if a.out.exists() else []
    if not a.render:
        torch.set_num_threads(a.threads)
        model, task, sents = load(a.student)
        command = " ".join(
            [
                COMMAND,
                *(["--student", repository_path(a.student)] if a.student != hicmlm.STUDENT else []),
                *(["--speedups"] if a.speedups else []),
                *(["--quick"] if a.quick else []),
                f"--passes {a.passes} --threads {a.threads} --reps {a.reps}",
            ]
        )
        record = {
            "kind": "speedups" if a.speedups else "profile",
            "student_sha256": hicmlm.student_digest(a.student),
            "student_layout": hicmlm.student_layout(model),
            "command": command,
            "date": time.strftime("%Y-%m-%d"),
            "torch": torch.__version__,
            "hardware": common.hardware("cpu"),
            "threads": a.threads,
            "reps": a.reps,
            "passes": a.passes,
            "load_before": common.load_average(),
        }
        t0 = time.time()
        if a.speedups:
            record["speedups"] = speedups(
                model, task, sents, a.reps, ((1, 16), (64, 64)) if a.quick else ((1, 40), (64, 128))
            )
        else:
            record["profiles"] = {
                str(bsz): profiles(model, task, sents, bsz, a.passes, a.reps) for bsz in (1, 64)
            }
        record.update(load_after=common.load_average(), wall_seconds=round(time.time() - t0, 1))
        runs = keep(runs, record)
        write_json(a.out, {"runs": runs})
    block = render(runs)
    if a.out.resolve() == RESULTS.resolve():
        write_between_markers(PAGE, block, START, END)
    print(block, end="")


if __name__ == "__main__":
    main()

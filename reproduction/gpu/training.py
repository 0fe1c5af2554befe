"""200-update ``--fp16`` and ``--bf16`` training of every family at base size
(``make gpu-check PART=train``), judged from fairseq's own log.

Data: the Multi30k sample that the quickstart ships (``examples/quickstart/data``: 3,000
training and 200 validation pairs) in the quickstart's sentencepiece pieces and joined
dictionary (``examples/quickstart/model``): the pairs for HI-CMLM, ProphetNet and UniLM, the
English side alone for position masking.

Each run is ``python -m reproduction.gpu.fairseq_train`` (``fairseq-train``, with ``--bf16`` meaning
bfloat16 on the GPU) on the family's base architecture: Adam, an inverse-square-root schedule
after ``WARMUP`` warm-up updates, ``--max-update 200``, a log line every 10 updates, no
checkpoints, no validation. A run passes when its log shows

* all its updates and ``done training``;
* every logged loss finite;
* the loss decreasing: the mean of the last three logged losses below that of the first three;
* no overflow skip in the last half of the run: with ``--fp16`` fairseq scales the loss (from
  128), and a step whose gradients overflow is skipped, logged as "gradient overflow detected",
  and halves the scale. Skips while the scale finds its level are how dynamic loss scaling
  works: fairseq's own Transformer at ProphetNet's size (``transformer_768``, trained here too
  as the reference) skips 2-3 steps and settles at a scale of 16-32 (H100, seeds 1-3). A skip
  late in the run means gradients that keep growing, which is the fault this looks for.
"""

from __future__ import annotations

import math
import re
import signal
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from reproduction.gpu.cli import results_parser, write_json
from reproduction.gpu.data import SIZE_768, binarize_mono, binarize_pairs

ROOT = Path(__file__).resolve().parents[2]
USER_DIR = str(ROOT / "fairseq_ext")
QUICKSTART = ROOT / "examples" / "quickstart"
UPDATES = 200
WARMUP = 50
LOG_INTERVAL = 10
PRECISIONS = ("fp16", "bf16")


@dataclass(frozen=True)
class Family:
    arch: str
    data: str  # "pairs" or "mono"
    options: tuple[str, ...]  # task and criterion


PAIRS = ("-s", "en", "-t", "de", "--max-tokens", "4096")
FAMILIES = {
    "hi_cmlm": Family(
        "hi_cmlm_transformer_wmt_en_de",
        "pairs",
        (
            "--task",
            "cmlm_hybrid",
            *PAIRS,
            "--hybrid-strategy",
            "fence_replace",
            "--criterion",
            "nat_loss",
            "--label-smoothing",
            "0.1",
        ),
    ),
    "prophetnet": Family(
        "prophetnet_base",
        "pairs",
        (
            "--task",
            "translation_prophetnet",
            *PAIRS,
            "--criterion",
            "ngram_language_loss",
            "--label-smoothing",
            "0.1",
        ),
    ),
    "posmask": Family(
        "position_masked_roberta_base",
        "mono",
        (
            "--task",
            "position_masked_lm",
            "--tokens-per-sample",
            "128",
            "--sample-break-mode",
            "eos",
            "--batch-size",
            "64",
            "--criterion",
            "position_masked_lm",
        ),
    ),
    "unilm": Family(
        "unilm_transformer_base",
        "pairs",
        (
            "--task",
            "unilm_seq2seq",
            *PAIRS,
            "--criterion",
            "label_smoothed_cross_entropy",
            "--label-smoothing",
            "0.1",
        ),
    ),
}
# fairseq's own Transformer at ProphetNet's size (as in gpu.throughput), trained the same way: the
# reference for how often fp16 loss scaling skips a step on this data without the plugin (part
# ``train`` runs it beside the families).
REFERENCES = {
    "transformer_768": Family(
        "transformer",
        "pairs",
        (
            "--task",
            "translation",
            *PAIRS,
            *SIZE_768,
            "--activation-fn",
            "gelu",
            "--share-all-embeddings",
            "--criterion",
            "label_smoothed_cross_entropy",
            "--label-smoothing",
            "0.1",
        ),
    )
}
OPTIMIZATION = (
    "--optimizer",
    "adam",
    "--adam-betas",
    "(0.9,0.98)",
    "--lr",
    "3e-4",
    "--lr-scheduler",
    "inverse_sqrt",
    "--warmup-updates",
    str(WARMUP),
    "--warmup-init-lr",
    "1e-7",
    "--clip-norm",
    "1.0",
    "--weight-decay",
    "0.01",
    "--dropout",
    "0.1",
)
LOGGING = (
    "--log-format",
    "simple",
    "--no-progress-bar",
    "--no-save",
    "--disable-validation",
    "--num-workers",
    "0",
)


def prepare(work: Path) -> dict[str, Path]:
    """The quickstart sample in sentencepiece pieces, binarized as pairs and as English text."""
    pieces = work / "pieces"
    pieces.mkdir(parents=True, exist_ok=True)
    for split in ("train", "valid"):
        for lang in ("en", "de"):
            with (
                open(QUICKSTART / "data" / f"{split}.{lang}") as fin,
                open(pieces / f"{split}.{lang}", "w") as fout,
            ):
                subprocess.run(
                    [
                        sys.executable,
                        str(ROOT / "data_prep" / "spm.py"),
                        "encode",
                        "--model",
                        str(QUICKSTART / "model" / "spm.model"),
                    ],
                    stdin=fin,
                    stdout=fout,
                    check=True,
                )
    dictionary = QUICKSTART / "model" / "dict.txt"
    return {
        "pairs": binarize_pairs(pieces / "train", pieces / "valid", dictionary, work / "pairs"),
        "mono": binarize_mono(pieces / "train.en", pieces / "valid.en", dictionary, work / "mono"),
    }


def command(
    family: str,
    precision: str,
    data: dict[str, Path],
    updates: int,
    save_dir: Path,
    log_interval: int = LOG_INTERVAL,
    cpu: bool = False,
    seed: int = 1,
) -> list[str]:
    """The training command line of ``family`` in ``precision`` ("fp16" or "bf16"), on the GPU
    or, with ``cpu``, on the CPU (``make gpu-rehearsal``). Nothing is saved, but fairseq checks
    that it could write to ``save_dir``: one folder per run, so that runs side by side do not
    race there."""
    spec = {**FAMILIES, **REFERENCES}[family]
    return [
        sys.executable,
        "-m",
        "reproduction.gpu.fairseq_train",
        str(data[spec.data]),
        "--user-dir",
        USER_DIR,
        "--arch",
        spec.arch,
        *spec.options,
        *OPTIMIZATION,
        *LOGGING,
        "--seed",
        str(seed),
        "--log-interval",
        str(log_interval),
        "--max-update",
        str(updates),
        f"--{precision}",
        "--save-dir",
        str(save_dir),
        *(["--cpu"] if cpu else []),
    ]


INNER = re.compile(r"train_inner\W+epoch \d+:\s+\d+ / \d+ (?P<stats>\S.*)$")
UPDATE_COUNT = re.compile(r"num_updates[= ](\d+)")


def _value(text: str):
    try:
        return float(text)
    except ValueError:
        return text


def parse_log(text: str) -> dict:
    """fairseq's ``train_inner`` statistics (one dict per logged interval), the number of
    updates logged before each overflow note, the last update count and ``done training``."""
    intervals, overflows, logged = [], [], 0
    for line in text.splitlines():
        match = INNER.search(line)
        if match:
            stats = dict(item.split("=", 1) for item in match["stats"].split(", ") if "=" in item)
            intervals.append({k: _value(v) for k, v in stats.items()})
            logged = int(intervals[-1].get("num_updates", logged))
        elif "gradient overflow detected" in line:
            overflows.append(logged)
    counts = [int(n) for n in UPDATE_COUNT.findall(text)]
    return {
        "intervals": intervals,
        "overflow_after_update": overflows,
        "num_updates": max(counts, default=0),
        "done": "done training" in text,
    }


def judge(parsed: dict, returncode: int, updates: int) -> dict:
    """The verdict on one run: the checks of the module docstring, each with its numbers."""
    losses = [s["loss"] for s in parsed["intervals"] if isinstance(s.get("loss"), float)]
    finite = bool(losses) and all(math.isfinite(x) for x in losses)
    head = statistics.mean(losses[:3]) if losses else math.nan
    tail = statistics.mean(losses[-3:]) if losses else math.nan
    late = sum(1 for n in parsed["overflow_after_update"] if n >= updates // 2)
    checks = {
        "exit code 0": returncode == 0,
        f"{updates} updates": parsed["num_updates"] >= updates and parsed["done"],
        "loss finite": finite,
        "loss decreasing": finite and len(losses) >= 6 and tail < head,
        "no overflow skip in the last half": late == 0,
    }
    scales = [
        s["loss_scale"] for s in parsed["intervals"] if isinstance(s.get("loss_scale"), float)
    ]
    return {
        "passed": all(checks.values()),
        "failed_checks": [k for k, ok in checks.items() if not ok],
        "updates": parsed["num_updates"],
        "loss_first3": head,
        "loss_last3": tail,
        "overflow_skips": len(parsed["overflow_after_update"]),
        "overflow_skips_last_half": late,
        "final_loss_scale": scales[-1] if scales else None,
    }


def exit_words(returncode: int) -> str:
    """How the summaries name a process's exit code: ``exit 0``; 124 the deadline (set when a
    call stops a process at its time limit); -N the signal N that ended the process (fairseq's
    log can read ``done training`` before a process dies at its exit)."""
    if returncode == 124:
        return "stopped at the deadline"
    if returncode < 0:
        try:
            return f"exit {returncode} ({signal.Signals(-returncode).name})"
        except ValueError:
            pass
    return f"exit {returncode}"


def verdict(run: dict) -> str:
    """A run's verdict as the summaries print it: ``ok``, or ``FAILED:`` and each failed check,
    then how the process ended when it did not exit 0."""
    if run["passed"]:
        return "ok"
    ended = run.get("returncode")
    failed = "FAILED: " + ", ".join(run["failed_checks"])
    return f"{failed}; {exit_words(ended)}" if ended not in (0, None) else failed


def _run(
    family: str,
    precision: str,
    seed: int,
    cmd: list[str],
    log: Path,
    updates: int,
    timeout: float | None,
) -> dict:
    t0 = time.time()
    with open(log, "w") as out:
        try:
            returncode = subprocess.run(
                cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, timeout=timeout
            ).returncode
        except subprocess.TimeoutExpired:
            returncode = 124
    text = log.read_text(errors="replace")
    verdict = judge(parse_log(text), returncode, updates)
    last = [line for line in text.splitlines() if line.strip()][-1:] or [""]
    return {
        "family": family,
        "arch": cmd[cmd.index("--arch") + 1],
        "precision": precision,
        "seed": seed,
        "returncode": returncode,
        "seconds": round(time.time() - t0, 1),
        "log": log.name,
        "last_line": "" if verdict["passed"] else last[0][-300:],
        **verdict,
    }


def run_all(
    results: Path,
    families: list[str],
    precisions: list[str],
    updates: int,
    jobs: int,
    deadline: float | None,
    log_interval: int = LOG_INTERVAL,
    cpu: bool = False,
    seeds: tuple[int, ...] = (1,),
) -> list[dict]:
    """Every (family, precision, seed) run, ``jobs`` at a time; logs and ``train.json`` in
    ``results``."""
    work = results / "train"
    work.mkdir(parents=True, exist_ok=True)
    data = prepare(work / "data")
    runs = [(f, p, s) for f in families for p in precisions for s in seeds]

    def one(run):
        family, precision, seed = run
        timeout = None if deadline is None else max(1.0, deadline - time.time())
        name = f"{family}-{precision}" + ("" if seeds == (1,) else f"-s{seed}")
        cmd = command(family, precision, data, updates, work / name, log_interval, cpu, seed)
        return _run(family, precision, seed, cmd, work / f"{name}.log", updates, timeout)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        out = list(pool.map(one, runs))
    write_json(results / "train.json", out)
    return out


def main(argv: list[str] | None = None) -> None:
    p = results_parser("python -m reproduction.gpu.training", __doc__, "the logs and train.json")
    p.add_argument(
        "--only",
        nargs="+",
        choices=[*FAMILIES, *REFERENCES],
        default=[*FAMILIES, *REFERENCES],
        help="what to train (default: the plugin's four families and transformer_768, fairseq's "
        "own Transformer at ProphetNet's size, the reference for fp16 overflow skips)",
    )
    p.add_argument("--seeds", nargs="+", type=int, default=[1], help="training seeds (default 1)")
    p.add_argument("--precision", nargs="+", choices=PRECISIONS, default=list(PRECISIONS))
    p.add_argument("--updates", type=int, default=UPDATES)
    p.add_argument("--jobs", type=int, default=3, help="runs sharing the GPU at a time (default 3)")
    p.add_argument(
        "--log-interval",
        type=int,
        default=LOG_INTERVAL,
        help=f"updates per logged loss (default {LOG_INTERVAL}; the verdict needs 6 logged losses)",
    )
    p.add_argument(
        "--cpu",
        action="store_true",
        help="train on the CPU (make gpu-rehearsal: no CUDA, few updates)",
    )
    p.add_argument(
        "--deadline-s", type=float, help="stop runs still going this many seconds from now"
    )
    args = p.parse_args(argv)
    deadline = None if args.deadline_s is None else time.time() + args.deadline_s
    runs = run_all(
        args.results,
        args.only,
        args.precision,
        args.updates,
        args.jobs,
        deadline,
        args.log_interval,
        args.cpu,
        tuple(args.seeds),
    )
    for r in runs:
        print(
            f"{r['arch']:32s} {r['precision']} seed {r['seed']} updates={r['updates']} loss "
            f"{r['loss_first3']:.3f} -> {r['loss_last3']:.3f} overflow skips "
            f"{r['overflow_skips']} ({r['overflow_skips_last_half']} in the last half) {verdict(r)}"
        )
    sys.exit(0 if all(r["passed"] for r in runs) else 1)


if __name__ == "__main__":
    main()

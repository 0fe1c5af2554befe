"""Throughput of ONE model loaded by the Python API and shared by 1, 2 and 4 threads
(docs/python-api.md, "Serving many users").

The shipped student (``hub.from_pretrained("hi-cmlm-multi30k-en-de")``, its default decoding:
10 passes, length beam 3) translates the first ``--sentences`` sentences of the shipped test
sample as requests of ``--per-call`` sentences each (1: a request per sentence; 8: requests
gathered into calls of 8); with T threads, thread i sends every T-th request, all threads released
together at a barrier. Sentences per second = sentences / wall
time, the median over ``--rounds`` rounds, the thread counts interleaved within each round.
torch's own thread pool is set to ``--torch-threads`` for every count (threads x torch threads
is what competes for the cores). Every threaded output is checked against the sequential one.

The results file records the processor, the core count and the machine's load average
(``uptime``) before and after: a busy machine lowers and flattens the numbers.

    python -m reproduction.benchmarks.hub_threads  # writes results/hub_threads.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import threading
import time
from pathlib import Path

from reproduction.benchmarks.common import ROOT, cpu_threads, hardware

SAMPLE = ROOT / "examples" / "quickstart" / "data" / "test.en"
OUT = Path(__file__).resolve().parent / "results" / "hub_threads.json"


def uptime() -> str:
    """``uptime``'s line (the load averages over 1, 5 and 15 minutes)."""
    return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()


def serve(model, requests: list[list[str]], threads: int) -> tuple[float, list[list[str]]]:
    """Wall seconds for ``threads`` threads to translate ``requests`` (thread i takes requests
    i, i + threads, ...), and the outputs in request order."""
    outputs: list = [None] * len(requests)
    barrier = threading.Barrier(threads + 1)

    def work(first: int) -> None:
        barrier.wait()
        for index in range(first, len(requests), threads):
            outputs[index] = model.translate(requests[index])

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    barrier.wait()
    start = time.perf_counter()
    for worker in workers:
        worker.join()
    return time.perf_counter() - start, outputs


def measure(model, sentences: list[str], per_call: int, args) -> dict:
    """Sentences per second under each thread count of ``args.threads`` (median of
    ``args.rounds`` interleaved rounds), requests of ``per_call`` sentences."""
    requests = [sentences[i : i + per_call] for i in range(0, len(sentences), per_call)]
    _, sequential = serve(model, requests, 1)  # warm-up, and the reference outputs
    seconds: dict[int, list[float]] = {t: [] for t in args.threads}
    for _ in range(args.rounds):
        for threads in args.threads:
            wall, outputs = serve(model, requests, threads)
            if outputs != sequential:
                raise SystemExit(f"{threads} threads gave other outputs than one thread")
            seconds[threads].append(wall)
    return {
        "sentences_per_call": per_call,
        "sentences_per_second": {
            str(t): round(len(sentences) / statistics.median(s), 1) for t, s in seconds.items()
        },
        "seconds": {str(t): [round(x, 3) for x in s] for t, s in seconds.items()},
        "outputs_equal_one_thread": True,
        "uptime_after": uptime(),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=96)
    parser.add_argument(
        "--per-call", type=int, nargs="+", default=[1, 8], help="sentences per request"
    )
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)

    from fairseq_ext import hub

    model = hub.from_pretrained("hi-cmlm-multi30k-en-de")
    sentences = SAMPLE.read_text(encoding="utf-8").splitlines()[: args.sentences]
    load_before = uptime()
    with cpu_threads("cpu", args.torch_threads):
        rows = [measure(model, sentences, per_call, args) for per_call in args.per_call]
        threads_note = hardware("cpu")
    result = {
        "model": "hi-cmlm-multi30k-en-de (10 passes, length beam 3)",
        "sentences": len(sentences),
        "torch_threads": args.torch_threads,
        "rounds": args.rounds,
        "hardware": threads_note,
        "cores": os.cpu_count(),
        "uptime_before": load_before,
        "uptime_after": uptime(),
        "rows": rows,
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()

"""benchmarks/common.py is the one harness of the benchmarks: its interleaving and medians
against a brute-force account, the modules' timings, threads and memory going through it
(read from their source, and a one-round run of each with tiny sizes whose every ratio comes
out of the harness), and ``benchmarks.run``'s --device check."""

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fairseq_ext.common.errors import FairseqExtError
from reproduction.benchmarks import common, own_inputs
from reproduction.benchmarks.hicmlm import Grid
from reproduction.benchmarks.plot import RATIO_NAME
from reproduction.benchmarks.run import BENCHMARKS, main
from reproduction.tests.conftest import fork_commands_of

ROOT = Path(__file__).resolve().parents[2]
# what only common.py may call: timers, CUDA synchronisation and memory, thread settings
HARNESS_ONLY = {
    "perf_counter",
    "synchronize",
    "max_memory_allocated",
    "reset_peak_memory_stats",
    "set_num_threads",
    "median",
    "parse_args_and_arch",
    "setup_task",
}


def test_interleaved_medians_alternates_the_order_and_takes_each_sides_median(monkeypatch):
    calls = []
    durations = {"a": iter([5.0, 1.0, 3.0, 2.0]), "b": iter([0.5, 9.0, 0.7, 0.6])}

    def fake_timed(fn, device):
        fn()
        return next(durations[calls[-1]])

    monkeypatch.setattr(common, "timed", fake_timed)
    fns = {name: (lambda n: lambda: calls.append(n))(name) for name in ("a", "b")}
    secs = common.interleaved_medians(fns, reps=4, device="cpu", warmup=1)
    assert calls == [
        "a",
        "b",
        "a",
        "b",
        "b",
        "a",
        "a",
        "b",
        "b",
        "a",
    ]  # warm-up, then A B, B A, A B, B A
    assert secs == {"a": (2.0 + 3.0) / 2, "b": (0.6 + 0.7) / 2}


def test_share_of_time_in_counts_only_the_hooked_modules_forward():
    inner, outer = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    x = torch.randn(2000, 4)

    def fn():
        for _ in range(20):
            inner(x)
        for _ in range(20):
            outer(x)
            outer(x)

    share = common.share_of_time_in([inner], fn, reps=3, device="cpu")
    assert 0.0 < share < 1.0
    assert not inner._forward_hooks and not inner._forward_pre_hooks  # the hooks are removed


def test_cpu_threads_sets_and_restores_the_count():
    before = torch.get_num_threads()
    with common.cpu_threads("cpu", 1):
        assert torch.get_num_threads() == 1
        assert common.hardware("cpu").endswith(", 1 thread")
    assert torch.get_num_threads() == before
    with common.cpu_threads("cpu", None):
        assert torch.get_num_threads() == before


@pytest.mark.parametrize("name", BENCHMARKS)
def test_module_times_threads_builds_and_measures_memory_through_common(name):
    source = (ROOT / "reproduction" / "benchmarks" / f"{name}.py").read_text()
    tree = ast.parse(source)
    called = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    called |= {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    assert not called & HARNESS_ONLY, f"benchmarks/{name}.py times, builds or sets threads itself"
    assert "/proc/self" not in source and "import time" not in source
    uses = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "common"
    }
    trains = name not in DECODING_ONLY
    assert {"interleaved_medians", "run_on_threads"} | (
        {"build", "train_peak_memory", "train_one_main"} if trains else set()
    ) <= uses


# decodes only (no training side, no memory): its quick run is tested in test_benchmarks_frontier.py
DECODING_ONLY = ("frontier",)
TINY = [
    "--encoder-layers",
    "1",
    "--encoder-embed-dim",
    "32",
    "--encoder-ffn-embed-dim",
    "64",
    "--encoder-attention-heads",
    "2",
]
# module constants -> tiny values, where a module has them: sizes, and (sentences, source
# tokens, target tokens) of batches
TINY_CONSTANTS = {
    "SIZES": [
        *TINY,
        "--decoder-layers",
        "1",
        "--decoder-embed-dim",
        "32",
        "--decoder-ffn-embed-dim",
        "64",
        "--decoder-attention-heads",
        "2",
        "--share-all-embeddings",
    ],
    "SMALL": TINY,
    "BASE": TINY,
    "GIGAWORD": (4, 16, 6),
    "LONG": (2, 16, 8),
    "QUICK_DECODE": Grid(((1, 2), (2, 4)), (1, 4), (1, 3), (1, 5)),  # decoding rows
}


@pytest.fixture
def one_round(monkeypatch):
    """The harness with every timed call taking exactly 1 s (each function still runs once,
    no warm-up), and training memory measured by running each side's updates in process;
    records which sides went through it."""
    seen = {"rounds": [], "memory": []}
    real = common.interleaved_medians

    def fake_timed(fn, device):
        fn()
        return 1.0

    def one_round_of(fns, reps, device, warmup=1):
        seen["rounds"].append(list(fns))
        return real(fns, 1, device, 0)

    def fake_memory(module, names, train_updates, device):
        for side in names:
            train_updates(side, device)
        seen["memory"].append((module, names))
        return {f"train_peak_rss_mb_{side}": 0.0 for side in names}

    monkeypatch.setattr(common, "timed", fake_timed)
    monkeypatch.setattr(common, "interleaved_medians", one_round_of)
    monkeypatch.setattr(common, "train_peak_memory", fake_memory)
    fork_commands_of(monkeypatch, own_inputs)  # the decoding rows' fairseq-preprocess
    return seen


@pytest.mark.parametrize("name", [name for name in BENCHMARKS if name not in DECODING_ONLY])
def test_every_ratio_of_a_module_comes_from_the_harness(name, one_round, monkeypatch, tmp_path):
    """Through ``make bench``'s entry point (``run.main``, its --quick mode), so that the way
    it finds each module is tested too."""
    module = importlib.import_module(f"reproduction.benchmarks.{name}")
    for constant, tiny in TINY_CONSTANTS.items():
        if hasattr(module, constant):
            monkeypatch.setattr(module, constant, tiny)
    threads = torch.get_num_threads()
    main(["--only", name, "--quick", "--out", str(tmp_path)])
    result = json.loads((tmp_path / "cpu.json").read_text())["benchmarks"][name]
    assert (tmp_path / "speed.png").is_file()
    assert (tmp_path / "maskpredict_speedup.png").is_file() == (name == "hicmlm")
    assert torch.get_num_threads() == threads
    ratios = {k: v for k, v in result["metrics"].items() if RATIO_NAME.search(k)}
    assert ratios and all(v == 1.0 for v in ratios.values()), (
        ratios
    )  # every side timed 1 s by the harness
    assert one_round["rounds"] and all(
        len(sides) >= 2 for sides in one_round["rounds"]
    )  # sides side by side
    ((memory_module, sides),) = one_round["memory"]
    assert memory_module == f"reproduction.benchmarks.{name}"
    assert {f"train_peak_rss_mb_{side}" for side in sides} <= set(result["metrics"])
    if getattr(module, "CPU_THREADS", None) is None:
        assert result["hardware"] == common.hardware("cpu")
    else:
        assert result["hardware"].endswith(f", {module.CPU_THREADS} thread")


def test_dummy_dictionaries_are_there_while_the_process_runs_and_gone_when_it_exits():
    code = (
        "from pathlib import Path; from reproduction.benchmarks import common; d = "
        "Path(common.dummy_dictionary_dir(10, ('en', ''))); print(d, *sorted(p.name for p in "
        "d.iterdir()), len((d / 'dict.en.txt').read_text().splitlines()))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    folder, *names, entries = proc.stdout.split()
    assert (
        names == ["dict.en.txt", "dict.txt"] and entries == "6"
    )  # 10 entries less fairseq's 4 specials
    assert Path(folder).name.startswith("fairseq_ext_bench_") and not Path(folder).exists()


def test_train_one_child_refuses_a_wrong_side_with_its_usage():
    proc = subprocess.run(
        [sys.executable, "-m", "reproduction.benchmarks.posmask", "--train-one", "bert"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "usage: python -m reproduction.benchmarks.posmask --train-one "
        "{position_masked_roberta,roberta} (python -m reproduction.benchmarks.run --only "
        "posmask runs the benchmark)"
    )


def test_run_refuses_cuda_without_cuda(monkeypatch, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(
        FairseqExtError, match=r"^--device cuda, but torch.cuda.is_available\(\) is false"
    ):
        main(["--device", "cuda", "--out", str(tmp_path)])
    assert not list(tmp_path.iterdir())


def test_run_cli_says_the_cuda_refusal_in_one_line():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "reproduction.benchmarks.run",
            "--device",
            "cuda",
            "--only",
            "posmask",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "fairseq_ext: error: --device cuda, but torch.cuda.is_available() is false (a CPU build "
        "of torch, or no GPU visible): run with --device cpu, or on a machine with a GPU and a "
        "CUDA build of torch"
    ]


def test_summary_rows_are_each_familys_rate_and_memory_beside_the_reference():
    from reproduction.benchmarks.run import render_summary

    metrics = {
        "hicmlm_train_tokens_per_s": 2000.0,
        "cmlm_train_tokens_per_s": 2500.0,
        "train_peak_rss_mb_hicmlm": 1100.0,
        "train_peak_rss_mb_cmlm": 1000.0,
    }
    gpu = {"unilm_train_target_tokens_per_s": 300.0, "transformer_train_target_tokens_per_s": 200.0}
    text = render_summary(
        {
            "cpu": {"hardware": "CPU, 2 threads", "benchmarks": {"hicmlm": {"metrics": metrics}}},
            "gpu": {
                "hardware": "GPU",
                "benchmarks": {"unilm": {"metrics": gpu, "hardware": "H200"}},
            },
        }
    )
    assert (
        "| HI-CMLM vs fairseq `cmlm_transformer` | CPU, 2 threads | 2,000 vs 2,500 tokens/s | "
        "0.800 | 1,100 vs 1,000 |" in text
    )
    assert (
        "| UniLM vs fairseq `transformer` | H200 | 300 vs 200 target tokens/s | 1.500 |  |" in text
    )
    assert "position-masked" not in text  # a family without a row in the file has none here
    assert text.endswith(
        "\nCPU rows: `make bench` (`python -m reproduction.benchmarks.run`): "
        "`reproduction/benchmarks/results/cpu.json`.\n\nGPU rows: `make gpu-check PART=bench` "
        "on one GPU, published with `python -m reproduction.gpu.publish`: "
        "`reproduction/benchmarks/results/gpu.json`.\n"
    )
    dated = render_summary(
        {
            "gpu": {
                "hardware": "NVIDIA H200",
                "date": "2026-11-28",
                "torch": "2.11.0+cu130",
                "benchmarks": {},
            }
        }
    )
    assert dated.endswith(
        "\nGPU rows: `make gpu-check PART=bench` on one NVIDIA H200, published with `python -m "
        "reproduction.gpu.publish`, 2026-11-28, torch 2.11.0+cu130: "
        "`reproduction/benchmarks/results/gpu.json`.\n"
    )

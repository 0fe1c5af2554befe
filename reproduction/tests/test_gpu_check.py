"""``make gpu-check`` without a GPU: the targets parse, the check stops at once with one line
without CUDA, the wheels folder is found or what is missing is named, every command line and
model of the GPU runs parses and builds, fairseq's training log is judged as stated, the FLOPs
counted for MFU equal a hand count, and the summary shows what was measured."""

import json
import subprocess
import sys

import pytest
import torch
from fairseq import tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

from fairseq_ext.common.errors import FairseqExtError
from reproduction.gpu import check, flops, report, throughput, training, wheels
from reproduction.gpu.fairseq_train import parse_training_args
from tests.conftest import ROOT


def _make(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", *args], cwd=ROOT, capture_output=True, text=True)


def test_make_targets_parse():
    default, wheels_target = _make("-n", "gpu-check"), _make("-n", "gpu-wheels")
    assert default.returncode == wheels_target.returncode == 0
    assert "-m reproduction.gpu.check --part all --wheels reproduction/gpu/wheels" in default.stdout
    assert "-m reproduction.gpu.wheels --dest reproduction/gpu/wheels" in wheels_target.stdout
    bench = _make("-n", "gpu-check", "PART=tests,mfu", "COPY_TO=/tmp/out", "DEADLINE=560")
    assert (
        "--part tests,mfu --wheels reproduction/gpu/wheels --copy-to /tmp/out --deadline-s 560"
        in bench.stdout
    )


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA"
)
def test_without_cuda_gpu_check_stops_with_one_line_before_installing(tmp_path):
    results = tmp_path / "results"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "reproduction.gpu.check",
            "--wheels",
            str(tmp_path / "no-wheels"),
            "--results",
            str(results),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "gpu-check: no CUDA device here (torch.cuda.is_available() is False): run `make "
        "gpu-check` on a machine with an NVIDIA GPU (docs/gpu.md)"
    ]
    assert (
        not results.exists()
    )  # the CUDA check comes before the wheels, the install and the results
    through_make = _make("gpu-check", f"GPU_WHEELS={tmp_path / 'no-wheels'}")
    assert through_make.returncode != 0 and "Traceback" not in through_make.stderr
    assert proc.stderr.splitlines()[0] in through_make.stderr


def _fake_wheels(folder, skip=(), version_of=None):
    folder.mkdir()
    for name, version in wheels.PINS.items():
        if name not in skip:
            version = (version_of or {}).get(name, version)
            (folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl").write_bytes(b"")


def test_wheels_folder_is_found_or_what_is_missing_is_named(tmp_path):
    with pytest.raises(
        FairseqExtError, match=r"wheels folder .*absent is missing: run `make gpu-wheels`"
    ):
        wheels.require_wheels(tmp_path / "absent")
    _fake_wheels(tmp_path / "all")
    assert [p.name.split("-")[0] for p in wheels.require_wheels(tmp_path / "all")] == [
        n.replace("-", "_") for n in wheels.PINS
    ]
    _fake_wheels(tmp_path / "partial", skip=("omegaconf",), version_of={"bitarray": "0.1"})
    assert wheels.missing(tmp_path / "partial") == ["omegaconf==2.3.0", "bitarray==3.12.3"]
    with pytest.raises(
        FairseqExtError, match=r"lacks omegaconf==2.3.0, bitarray==3.12.3: run `make gpu-wheels`"
    ):
        wheels.require_wheels(tmp_path / "partial")
    other_python = tmp_path / "cp311"
    other_python.mkdir()
    (other_python / "fairseq_fixed-0.12.3.1-cp311-cp311-linux_x86_64.whl").write_bytes(b"")
    assert "fairseq-fixed==0.12.3.1" in wheels.missing(other_python)


def test_bf16_means_bfloat16_not_a_tpu(tiny_data):
    argv = [str(tiny_data), "--task", "translation", "--arch", "transformer", "--bf16"]
    from fairseq import options

    assert options.parse_args_and_arch(
        options.get_training_parser(), argv
    ).tpu  # fairseq 0.12's parser
    args = parse_training_args(argv)
    assert args.bf16 and not args.tpu


@pytest.mark.parametrize("family", list(training.FAMILIES))
def test_training_commands_build_their_base_models(family, tiny_data, mono_data, tmp_path):
    data = {"pairs": tiny_data, "mono": mono_data}
    cmd = training.command(family, "fp16", data, updates=200, save_dir=tmp_path)
    assert cmd[:3] == [sys.executable, "-m", "reproduction.gpu.fairseq_train"]
    cfg = convert_namespace_to_omegaconf(parse_training_args(cmd[3:]))
    assert (
        cfg.common.fp16
        and cfg.optimization.max_update == 200
        and cfg.checkpoint.save_dir == str(tmp_path)
    )
    assert (
        cfg.model._name == training.FAMILIES[family].arch
    )  # the architecture, dataclass-registered or not
    model = tasks.setup_task(cfg.task).build_model(cfg.model)
    assert sum(p.numel() for p in model.parameters()) > 40e6  # base size, not the tiny one


@pytest.mark.parametrize("name", list(throughput.MODELS))
def test_throughput_models_parse_and_set_up_their_tasks(name, tiny_data, mono_data):
    model = throughput.MODELS[name]
    data = tiny_data if model.data == "pairs" else mono_data
    args = parse_training_args(
        [
            str(data),
            "--user-dir",
            throughput.USER_DIR,
            *model.options,
            *throughput.TRAINING,
            "--bf16",
        ]
    )
    assert args.bf16 and not args.tpu and args.batch_size in (64, 128)
    tasks.setup_task(convert_namespace_to_omegaconf(args).task)


def test_throughput_counts_forward_and_backward_of_a_tiny_model(tiny_data):
    """A training step's FLOPs are three times its forward pass's: the backward pass does two
    matrix products (input and weight gradients) for every one of the forward pass."""
    model = throughput.MODELS["unilm_transformer_base"]
    row = throughput.measure(model, tiny_data, tiny=True, steps=1, batch_size=4)
    assert row["sentences"] == 4 and 4 < row["tokens_per_step"] <= row["slots_per_step"]
    assert row["tokens_per_s"] == pytest.approx(row["tokens_per_step"] / (row["step_ms"] / 1e3))
    trainer, sample, _, _ = throughput.build_trainer(model, tiny_data, tiny=True, batch_size=4)
    with torch.no_grad():
        forward = flops.count_flops(lambda: trainer.criterion(trainer.model, sample))
    assert row["flops_per_step"] == 3 * forward > 0


# ------------------------------------------------------------------ FLOPs and MFU
def test_flop_count_of_linear_layers_is_six_per_weight_and_token():
    torch.manual_seed(0)
    tokens, dims = 2 * 5, (8, 16, 8)
    mlp = torch.nn.Sequential(
        torch.nn.Linear(8, 16, bias=False), torch.nn.ReLU(), torch.nn.Linear(16, 8, bias=False)
    )
    x = torch.randn(
        2, 5, 8, requires_grad=True
    )  # as an embedding output, so input gradients are computed
    counted = flops.count_flops(lambda: mlp(x).sum().backward())
    # forward 2 per weight and token; backward 2 for the input gradient and 2 for the weight
    # gradient
    assert counted == 6 * tokens * (dims[0] * dims[1] + dims[1] * dims[2])


def test_flop_count_of_attention_matches_the_hand_count():
    torch.manual_seed(0)
    B, T, H, dh = 2, 6, 3, 4
    C = H * dh
    proj = torch.nn.Linear(C, 3 * C)
    x = torch.randn(B, T, C, requires_grad=True)

    def step():
        q, k, v = (t.view(B, T, H, dh).transpose(1, 2) for t in proj(x).split(C, dim=-1))
        ((q @ k.transpose(-1, -2)).softmax(-1) @ v).sum().backward()

    # projection: 6 per weight and token; scores and weighted sum: 2 T T dh per head forward, twice
    # backward
    assert flops.count_flops(step) == 6 * B * T * C * 3 * C + 3 * 2 * (2 * B * H * T * T * dh)


def test_mfu_and_the_listed_peaks():
    assert flops.mfu(989.4e12 * 0.5 * 2, 2.0, 989.4) == pytest.approx(0.5)
    assert flops.bf16_peak("NVIDIA H100 80GB HBM3")[0] == 989.4
    assert flops.bf16_peak("NVIDIA H100 PCIe")[0] == 756.5
    assert flops.bf16_peak("NVIDIA H200")[0] == 989.4
    assert flops.bf16_peak("NVIDIA H100 NVL") is None and flops.bf16_peak("Tesla T4") is None
    with pytest.raises(ValueError, match="positive step time"):
        flops.mfu(1e12, 0.0, 989.4)


# ------------------------------------------------------------------ fairseq's log, judged
def _log(losses, overflow_after=(), done=True, scale=128):
    """Lines as fairseq-train --log-format simple --log-interval 10 writes them."""
    stamp = "2026-11-23 14:09:16 | INFO |"
    lines = [f"{stamp} fairseq_cli.train | Start iterating over samples"]
    for i, loss in enumerate(losses):
        n = 10 * (i + 1)
        lines += [
            f"{stamp} fairseq.trainer | NOTE: gradient overflow detected, ignoring gradient, "
            "setting loss scale to: 64.0"
            for after in overflow_after
            if after == n - 10
        ]
        lines.append(
            f"{stamp} train_inner | epoch 001:     {n:2d} / 47 loss={loss}, nll_loss=1.1, "
            f"ppl=2.15, wps=32.8, ups=0.06, wpb=556.5, bsz=36, num_updates={n}, lr=0.0005, "
            f"gnorm=1.77, loss_scale={scale}, train_wall=29, gb_free=70.1, wall=38"
        )
    if done:
        lines += [
            f"{stamp} train | epoch 005 | loss 9.5 | num_updates {10 * len(losses)} | lr 0.0005",
            f"{stamp} fairseq_cli.train | done training in 89.3 seconds",
        ]
    return "\n".join(lines) + "\n"


DOWN = [12.5, 11.9, 11.0, 10.2, 9.7, 9.1, 8.8, 8.4, 8.0, 7.9]


def test_a_good_run_passes_with_its_numbers():
    parsed = training.parse_log(_log(DOWN, overflow_after=(0,)))
    assert [s["loss"] for s in parsed["intervals"]] == DOWN and parsed["num_updates"] == 100
    verdict = training.judge(parsed, 0, updates=100)
    assert verdict["passed"] and verdict["failed_checks"] == []
    assert verdict["loss_first3"] == pytest.approx(sum(DOWN[:3]) / 3)
    assert verdict["loss_last3"] == pytest.approx(sum(DOWN[-3:]) / 3)
    assert verdict["overflow_skips"] == 1 and verdict["overflow_skips_last_half"] == 0
    assert verdict["final_loss_scale"] == 128


def test_overflow_skips_while_the_scale_settles_pass():
    verdict = training.judge(
        training.parse_log(_log(DOWN, overflow_after=(0, 30, 40))), 0, updates=100
    )
    assert (
        verdict["passed"]
        and verdict["overflow_skips"] == 3
        and verdict["overflow_skips_last_half"] == 0
    )


@pytest.mark.parametrize(
    "log, returncode, failed",
    [
        (_log(DOWN[:-1] + ["nan"]), 0, ["loss finite", "loss decreasing"]),
        (_log(DOWN[:-1] + ["inf"]), 0, ["loss finite", "loss decreasing"]),
        (_log(list(reversed(DOWN))), 0, ["loss decreasing"]),
        (_log(DOWN, overflow_after=(50,)), 0, ["no overflow skip in the last half"]),
        (_log(DOWN[:4], done=False), 1, ["exit code 0", "100 updates", "loss decreasing"]),
    ],
)
def test_a_bad_run_fails_the_check_it_breaks(log, returncode, failed):
    verdict = training.judge(training.parse_log(log), returncode, updates=100)
    assert not verdict["passed"] and verdict["failed_checks"] == failed


@pytest.mark.parametrize(
    "returncode, shown",
    [
        (-6, "FAILED: exit code 0; exit -6 (SIGABRT)"),
        (124, "FAILED: exit code 0; stopped at the deadline"),
    ],
)
def test_a_run_that_trained_but_died_at_exit_shows_the_code_it_ended_with(returncode, shown):
    # fairseq logged all 100 updates and ``done training``; only the process's end failed
    run = {
        "returncode": returncode,
        **training.judge(training.parse_log(_log(DOWN)), returncode, updates=100),
    }
    assert run["failed_checks"] == ["exit code 0"] and training.verdict(run) == shown
    assert training.verdict({**run, "passed": True}) == "ok"


# ------------------------------------------------------------------ the summary
def test_junit_totals_count_and_name_the_failures(tmp_path):
    (tmp_path / "r.xml").write_text(
        '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" '
        'failures="1" skipped="1" tests="4"><testcase name="test_a"/><testcase name="test_b">'
        '<failure message="assert 1 == 2&#10;more">trace</failure></testcase>'
        '<testcase name="test_c"><skipped/></testcase><testcase name="test_d"/>'
        "</testsuite></testsuites>"
    )
    totals = check.junit_totals(tmp_path / "r.xml")
    assert totals == {
        "tests": 4,
        "failures": 1,
        "errors": 0,
        "skipped": 1,
        "passed_count": 2,
        "failed": ["test_b: assert 1 == 2"],
    }


def test_parts_are_all_or_a_list_in_their_order():
    assert check.parts("all") == ["tests", "train", "mfu", "flex", "bench"]
    assert check.parts("mfu,tests") == ["tests", "mfu"]
    with pytest.raises(
        Exception, match="unknown part speed: choose all or from tests, train, mfu, flex, bench"
    ):
        check.parts("tests,speed")


def _throughput_row(name, tokens_per_s):
    return {
        "model": name,
        "params_m": 60.0,
        "sentences": 128,
        "tokens_per_step": 16384,
        "step_ms": 16384 / tokens_per_s * 1e3,
        "tokens_per_s": tokens_per_s,
        "flops_per_step": 1e12,
        "tflops_per_s": 100.0,
        "peak_gib": 9.5,
        "mfu_datasheet": 0.25,
        "mfu_measured_matmul": 0.31,
    }


def test_summary_shows_every_part():
    run = {
        "family": "unilm",
        "arch": "unilm_transformer_base",
        "precision": "fp16",
        "returncode": 1,
        "seconds": 40.0,
        "log": "unilm-fp16.log",
        "last_line": "FloatingPointError: Minimum loss scale reached",
        **training.judge(training.parse_log(_log(DOWN[:-1] + ["nan"])), 1, updates=100),
    }
    summary = {
        "machine": {
            "device": "NVIDIA H100 80GB HBM3",
            "capability": "9.0",
            "torch": "2.11.0",
            "cuda": "13.0",
            "python": "3.12.3",
        },
        "date": "2026-11-24 10:00 UTC",
        "part": "all",
        "results": "reproduction/gpu/results/x",
        "passed": False,
        "install": {
            "passed": True,
            "returncode": 0,
            "seconds": 4.0,
            "log": "imports.log",
            "tail": "",
        },
        "tests": {
            "passed": True,
            "returncode": 0,
            "seconds": 50.0,
            "log": "tests.log",
            "tail": "",
            "tests": 15,
            "failures": 0,
            "errors": 0,
            "skipped": 0,
            "passed_count": 15,
            "failed": [],
        },
        "train": {
            "passed": False,
            "returncode": 1,
            "seconds": 200.0,
            "log": "train.log",
            "tail": "",
            "runs": [run],
        },
        "mfu": {
            "passed": True,
            "returncode": 0,
            "seconds": 90.0,
            "log": "throughput.log",
            "tail": "",
            "device": "NVIDIA H100 80GB HBM3",
            "precision": "bfloat16 (fairseq --bf16)",
            "flops_counted_by": "FlopCounterMode",
            "peak_tflops": 989.4,
            "peak_source": "datasheet",
            "measured_matmul_tflops": 790.0,
            "groups": {
                "unilm_transformer_base": ["unilm_transformer_base", "roberta_base"],
                "prophetnet_base": ["prophetnet_base", "transformer (6+6 x 768)"],
            },
            "models": {
                "unilm_transformer_base": _throughput_row("unilm_transformer_base", 200000.0),
                "roberta_base": _throughput_row("roberta_base", 100000.0),
                "prophetnet_base": {
                    "model": "prophetnet_base",
                    "error": "RuntimeError: CUDA error: a | b",
                },
                "transformer (6+6 x 768)": _throughput_row("transformer (6+6 x 768)", 100000.0),
            },
        },
        "bench": {
            "passed": False,
            "hardware": "NVIDIA H100 80GB HBM3",
            "torch": "2.11.0",
            "modules": {
                "unilm": {
                    "returncode": 0,
                    "seconds": 100.0,
                    "log": "benchmarks-unilm.log",
                    "tail": "",
                },
                "prophetnet": {
                    "returncode": 124,
                    "seconds": 300.0,
                    "log": "benchmarks-prophetnet.log",
                    "tail": "generating",
                },
                "hi_cmlm": {
                    "returncode": -9,
                    "seconds": 10.0,
                    "log": "benchmarks-hi_cmlm.log",
                    "tail": "Killed",
                },
            },
            "benchmarks": {"unilm": {"metrics": {"unilm_train_tokens_per_s_ratio": 0.5}}},
        },
        "flex": {
            "passed": True,
            "returncode": 0,
            "seconds": 120.0,
            "log": "flex.log",
            "tail": "",
            "table": (
                "| case | tokens | flex ms | dense ms |\n|---|---|---|---|\n| prefix | 1024 | "
                "1.0 | 2.0 |\n"
            ),
        },
    }
    text = report.render(summary)
    assert text.startswith("# gpu-check, part all: FAILED")
    assert (
        "## FlexAttention vs dense masked attention" in text
        and "| prefix | 1024 | 1.0 | 2.0 |" in text
    )
    assert "15 passed, 0 failed, 0 skipped" in text
    assert "| unilm | `unilm_transformer_base` | fp16 | 100 | 11.800 -> nan |" in text
    assert "FAILED: exit code 0, loss finite, loss decreasing; exit 1" in text
    assert "`FloatingPointError: Minimum loss scale reached`" in text
    # roberta reads half the tokens per second of UniLM here: ours / this = 2.00
    assert (
        "| `roberta_base` | `unilm_transformer_base` | 60.0 | 16,384 | 163.8 | 100,000 | 2.00 | "
        "100.0 | 25.0 % "
        "| 31.0 % | 9.50 |" in text
    )
    assert (
        "| `prophetnet_base` |  | RuntimeError: CUDA error: a / b |" in text
    )  # its error, and no ratio beside it
    assert (
        "| `transformer (6+6 x 768)` | `prophetnet_base` | 60.0 | 16,384 | 163.8 | 100,000 |  | "
        "100.0 |" in text
    )
    assert "- prophetnet: stopped at the deadline after 300.0 s (benchmarks-prophetnet.log)" in text
    assert (
        "- hi_cmlm: exit -9 (SIGKILL) after 10.0 s (benchmarks-hi_cmlm.log)" in text
    )  # a step a signal ended
    assert "| unilm | `unilm_train_tokens_per_s_ratio` | 0.500 |" in text
    json.dumps(summary)  # the summary is what summary.json holds


def test_publishing_drops_the_log_tails_of_passed_steps_only():
    from reproduction.gpu.publish import kept_name, without_passed_tails

    summary = {
        "date": "2026-11-26 06:46 UTC",
        "part": "tests-bench",
        "tests": {"returncode": 1, "tail": "FAILED x"},
        "bench": {"modules": {"hicmlm": {"returncode": 0, "tail": "wrote /somewhere/gpu.json"}}},
    }
    kept = without_passed_tails(summary)
    assert kept["tests"]["tail"] == "FAILED x"
    assert kept["bench"]["modules"]["hicmlm"] == {"returncode": 0}
    assert kept_name(summary) == "2026-11-26-0646-tests-bench.json"


def test_published_results_folder_is_a_path_inside_the_repository():
    from reproduction.gpu.publish import repository_path

    assert (
        repository_path("/srv/clone/reproduction/gpu/results/20261126-1321-train")
        == "reproduction/gpu/results/20261126-1321-train"
    )
    assert repository_path("reproduction/gpu/results/h-check") == "reproduction/gpu/results/h-check"
    assert repository_path("/elsewhere/run") == "/elsewhere/run"


def test_the_published_block_opens_with_one_index_line_per_run_oldest_first():
    from reproduction.gpu.publish import render_block

    def summary(date, device, part, passed):
        return {
            "date": date,
            "machine": {
                "device": device,
                "capability": "9.0",
                "torch": "t",
                "cuda": "c",
                "python": "p",
            },
            "part": part,
            "results": "reproduction/gpu/results/r",
            "passed": passed,
            "install": {"returncode": 0, "seconds": 1.0, "log": "install.log"},
        }

    block = render_block(
        [
            summary("2026-11-26 06:46 UTC", "NVIDIA H200", "tests-mfu", False),
            summary("2026-11-28 17:42 UTC", "NVIDIA H100", "train", True),
        ]
    )
    assert block.startswith(
        "| run (UTC) | GPU | parts | outcome |\n|---|---|---|---|\n"
        "| 2026-11-26 06:46 | NVIDIA H200 | tests, mfu | FAILED |\n"
        "| 2026-11-28 17:42 | NVIDIA H100 | train | passed |\n"
    )
    assert block.index("part tests-mfu: FAILED") < block.index("part train: PASSED")
    assert render_block([]) == ""

"""The summary of ``make gpu-check`` as markdown: one table per part (``summary.md``, also
printed at the end of the call)."""

from __future__ import annotations

from reproduction.gpu.training import exit_words, verdict


def _num(value, digits: int = 1) -> str:
    return "" if value is None else f"{value:,.{digits}f}"


def _pct(value) -> str:
    return "" if value is None else f"{100 * value:.1f} %"


def _step(out: dict) -> str:
    if out.get("returncode") is None:
        return out.get("tail", "not run")
    return f"{exit_words(out['returncode'])} after {out['seconds']} s ({out.get('log', '')})"


def _tail(out: dict) -> list[str]:
    """The last lines of a failed step's log."""
    if out.get("returncode") in (0, None):
        return []
    return ["", "```", out["tail"], "```"] if out.get("tail") else ["", "(the log is empty)"]


def _tests(tests: dict) -> list[str]:
    lines = ["## CUDA tests (`pytest -m cuda tests/test_cuda.py`)", "", _step(tests)]
    if "tests" in tests:
        lines += [
            "",
            f"{tests['passed_count']} passed, {tests['failures'] + tests['errors']} failed, "
            f"{tests['skipped']} skipped",
            *[f"- FAILED {name}" for name in tests["failed"]],
        ]
    return lines + _tail(tests)


def _training(train: dict) -> list[str]:
    lines = [
        "## 200-update training, `--fp16` and `--bf16` (`gpu.training`)",
        "",
        _step(train),
        "",
        "| family | architecture | precision | updates | loss, first 3 -> last 3 logged | "
        "overflow skips (in the last half) | final loss scale | seconds | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in train.get("runs", []):
        lines.append(
            f"| {r['family']} | `{r['arch']}` | {r['precision']} | {r['updates']} | "
            f"{_num(r['loss_first3'], 3)} -> {_num(r['loss_last3'], 3)} | {r['overflow_skips']} "
            f"({r.get('overflow_skips_last_half', '-')}) | {_num(r['final_loss_scale'], 0)} | "
            f"{r['seconds']} | {verdict(r)} |"
        )
    return (
        lines
        + [
            f"- {r['arch']} {r['precision']}: `{r['last_line']}`"
            for r in train.get("runs", [])
            if r["last_line"]
        ]
        + _tail(train)
    )


def _throughput(out: dict) -> list[str]:
    lines = ["## Training throughput and MFU (`gpu.throughput`)", "", _step(out)]
    models = out.get("models", {})
    if not models:
        return lines + _tail(out)
    lines += [
        "",
        f"{out['precision']} on {out['device']}; FLOPs: {out['flops_counted_by']}; peak "
        f"{_num(out['peak_tflops'])} TFLOP/s ({out['peak_source']}); a bf16 8192^3 matrix product "
        f"measured {_num(out['measured_matmul_tflops'])} TFLOP/s.",
        "",
        "| model | beside | params (M) | tokens/step | ms/step | tokens/s | ours / this "
        "(tokens/s) | TFLOP/s | MFU (datasheet peak) | MFU (measured matmul) | peak GiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for ours, names in out["groups"].items():
        for name in names:
            m = models.get(name)
            if m is None:
                continue
            beside = "" if name == ours else f"`{ours}`"
            if "error" in m:
                lines.append(f"| `{name}` | {beside} | {m['error'].replace('|', '/')} |")
                continue
            compared = name != ours and "tokens_per_s" in models.get(ours, {})
            ratio = f"{models[ours]['tokens_per_s'] / m['tokens_per_s']:.2f}" if compared else ""
            lines.append(
                f"| `{name}` | {beside} | {_num(m['params_m'])} | {m['tokens_per_step']:,} | "
                f"{_num(m['step_ms'])} | {_num(m['tokens_per_s'], 0)} | {ratio} | "
                f"{_num(m['tflops_per_s'])} | {_pct(m.get('mfu_datasheet'))} | "
                f"{_pct(m.get('mfu_measured_matmul'))} | {_num(m['peak_gib'], 2)} |"
            )
    return lines + _tail(out)


def _benchmarks(out: dict) -> list[str]:
    lines = [
        "## `make bench` on CUDA (`python -m reproduction.benchmarks.run --device cuda` -> "
        "gpu.json)",
        "",
    ]
    for name, step in out.get("modules", {}).items():
        lines += [f"- {name}: {_step(step)}", *_tail(step)]
    rows = [
        f"| {bench} | `{name}` | {value:.3f} |"
        if isinstance(value, float)
        else f"| {bench} | `{name}` | {value} |"
        for bench, res in out.get("benchmarks", {}).items()
        for name, value in res.get("metrics", {}).items()
    ]
    if rows:
        lines += [
            "",
            f"on {out.get('hardware', '?')}, torch {out.get('torch', '?')}",
            "",
            "| benchmark | metric | value |",
            "|---|---|---|",
            *rows,
        ]
    return lines


def _flex(out: dict) -> list[str]:
    lines = [
        "## FlexAttention vs dense masked attention (`python -m reproduction.gpu.flex_vs_dense`)",
        "",
        f"- {_step(out)}",
        *_tail(out),
    ]
    return lines + (["", out["table"].strip()] if out.get("table") else [])


def render(summary: dict) -> str:
    m = summary["machine"]
    lines = [
        f"# gpu-check, part {summary['part']}: {'PASSED' if summary['passed'] else 'FAILED'}",
        "",
        f"{m['device']} (compute capability {m['capability']}), torch {m['torch']}, CUDA "
        f"{m['cuda']}, Python {m['python']}, {summary['date']}; results in {summary['results']}",
        "",
        f"Install from the wheels: {_step(summary['install'])}",
        *_tail(summary["install"]),
    ]
    if "tests" in summary:
        lines += ["", *_tests(summary["tests"])]
    if "train" in summary:
        lines += ["", *_training(summary["train"])]
    if "mfu" in summary:
        lines += ["", *_throughput(summary["mfu"])]
    if "flex" in summary:
        lines += ["", *_flex(summary["flex"])]
    if "bench" in summary:
        lines += ["", *_benchmarks(summary["bench"])]
    return "\n".join(lines) + "\n"

"""The machine a measurement ran on: the processor's name and the core count."""

from __future__ import annotations

import os
import platform


def cpu_name() -> str:
    """The processor's name, e.g. ``Intel(R) Xeon(R) ...``."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next(
                line.split(":", 1)[1].strip() for line in f if line.startswith("model name")
            )
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def cpu_and_cores() -> str:
    """``cpu_name()`` and the number of cores, e.g. ``Intel(R) Xeon(R) ..., 2 cores``."""
    return f"{cpu_name()}, {os.cpu_count()} cores"

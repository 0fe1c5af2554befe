"""Real filesystem faults for the tests: a small tmpfs that fills up, a read-only mount, a
folder the user cannot write. A mount needs root (CI runs the suite as root); where none can
be made, the test is skipped with the reason."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

# root without the override of file permissions (CAP_DAC_OVERRIDE), for the commands it starts
WITHOUT_ROOTS_OVERRIDE = [
    "setpriv",
    "--inh-caps=-dac_override,-dac_read_search",
    "--bounding-set=-dac_override,-dac_read_search",
]


@contextlib.contextmanager
def tmpfs(target: Path, size_kib: int, read_only: bool = False):
    """A tmpfs of ``size_kib`` KiB mounted at ``target`` (read-only with ``read_only``),
    unmounted at the end."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small filesystem needs root (CI runs the tests as root)")
    target.mkdir(parents=True, exist_ok=True)
    options = f"size={size_kib}k" + (",ro" if read_only else "")
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], check=True)


def as_unprivileged(cmd: list) -> list:
    """``cmd`` run so that file permissions apply: as root, without root's override of them."""
    if os.geteuid() != 0:
        return cmd
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: root writes any folder")
    return WITHOUT_ROOTS_OVERRIDE + cmd

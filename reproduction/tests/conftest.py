"""The reproduction's tests share the product's fixtures (tiny data and checkpoints built
through fairseq's CLIs), and its commands are forked from the tests' server (``ForkedCommands``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import (  # noqa: F401  (pytest fixtures)
    forking_server,
    mono_data,
    spm_model,
    tiny_checkpoint,
    tiny_data,
)
from tests.forked_cli import ENTRY_POINTS


class ForkedCommands:
    """``subprocess`` for a module of the reproduction that starts commands itself (the Gigaword
    driver's data preparation, the benches' ``fairseq-preprocess``): each command runs as written,
    but with the tests' server's stand-ins first on PATH and fairseq's console scripts and the
    interpreter called by name, so that fairseq's commands and the plugin's Python programs are
    forked (tests.forked_cli), not started afresh."""

    DEVNULL, PIPE, STDOUT = subprocess.DEVNULL, subprocess.PIPE, subprocess.STDOUT

    @staticmethod
    def run(cmd, env=None, **kw):
        cmd = [str(c) for c in cmd]
        if cmd[0] == sys.executable:
            cmd[0] = "python"
        elif (
            Path(cmd[0]).parent == Path(sys.executable).parent and Path(cmd[0]).name in ENTRY_POINTS
        ):
            cmd[0] = Path(cmd[0]).name
        return subprocess.run(
            cmd, env=forking_server().script_env(dict(os.environ) if env is None else env), **kw
        )


def fork_commands_of(monkeypatch, *modules) -> None:
    """The commands that ``modules`` start, forked (``ForkedCommands``) while ``monkeypatch``
    holds."""
    for module in modules:
        monkeypatch.setattr(module, "subprocess", ForkedCommands)

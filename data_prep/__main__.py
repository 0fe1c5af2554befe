"""Run one data script of an installed plugin: ``python -m fairseq_ext.data_prep NAME [ARGS]``.

NAME is a script of ``data_prep/`` without its suffix (``wordpiece``, ``spm``, ``gigaword``, ...):
a ``.py`` script runs in this interpreter with its folder first on ``sys.path`` (the scripts
import each other by name), a ``.sh`` script runs with bash. Without NAME, list the scripts."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# shared code that the scripts source or import, not scripts of their own
HELPERS = {"common", "sentence_prediction_data"}


def scripts() -> dict[str, Path]:
    return {
        p.stem: p
        for p in sorted(HERE.iterdir())
        if p.suffix in {".py", ".sh"} and not p.stem.startswith("_") and p.stem not in HELPERS
    }


def main(argv: list[str]) -> int:
    found = scripts()
    if not argv or argv[0] in {"-h", "--help"}:
        print(
            f"usage: python -m fairseq_ext.data_prep NAME [ARGS]\nscripts in {HERE}: "
            f"{', '.join(found)}"
        )
        return 0
    name, args = argv[0], argv[1:]
    if name not in found:
        print(
            f"fairseq_ext.data_prep: error: no data script named {name!r}; one of: "
            f"{', '.join(found)}",
            file=sys.stderr,
        )
        return 2
    script = found[name]
    if script.suffix == ".sh":
        return subprocess.call(["bash", str(script), *args], env=dict(os.environ))
    sys.path.insert(0, str(HERE))
    sys.argv = [str(script), *args]
    runpy.run_path(str(script), run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

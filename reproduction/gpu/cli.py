"""What the command lines of ``gpu/`` share: a parser that takes the results folder, and the
JSON files they write there."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def results_parser(prog: str, doc: str, writes: str) -> argparse.ArgumentParser:
    """A parser with the module's docstring as its help and a required ``--results`` folder."""
    p = argparse.ArgumentParser(
        prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--results", type=Path, required=True, help=f"folder for {writes}")
    return p


def write_json(path: Path, value) -> None:
    path.write_text(json.dumps(value, indent=2) + "\n")

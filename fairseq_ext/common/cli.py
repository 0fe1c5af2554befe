"""The command-line parser of the plugin's ``python -m`` tools."""

from __future__ import annotations

import argparse


def command_parser(prog: str, doc: str | None) -> argparse.ArgumentParser:
    """A parser whose help is the module docstring ``doc`` as written."""
    return argparse.ArgumentParser(
        prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )

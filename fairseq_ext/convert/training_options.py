"""The ``fairseq-train`` options a converted model is built with."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path
from typing import List

from fairseq_ext import plugin


def training_args(data, argv: List[str]) -> Namespace:
    """fairseq-train's options for ``argv`` on ``data`` (recorded as an absolute path, so that
    the checkpoint loads from any folder)."""
    from fairseq import options

    plugin.load()
    parser = options.get_training_parser()
    return options.parse_args_and_arch(parser, [str(Path(data).resolve()), *argv])

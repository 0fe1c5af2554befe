"""The ``fairseq-train`` options a converted model is built with (``checkpoints.converted`` builds
and writes it)."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path
from typing import List

from fairseq_ext import plugin


def training_args(data, argv: List[str]) -> Namespace:
    """fairseq-train's options for ``argv`` (``--task``, ``--arch``, sizes, ...) on ``data``,
    the plugin's tasks and models registered (``plugin.load``). ``data`` is recorded as an
    absolute path, so that the saved checkpoint loads on its own from any working folder
    (``checkpoint_utils.load_model_ensemble_and_task([path])``)."""
    from fairseq import options

    plugin.load()
    parser = options.get_training_parser()
    return options.parse_args_and_arch(parser, [str(Path(data).resolve()), *argv])

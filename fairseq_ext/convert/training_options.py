"""The ``fairseq-train`` options a converted model is built with."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path
from typing import List

from fairseq_ext import plugin
from fairseq_ext.checkpoints import converted


def training_args(data, argv: List[str]) -> Namespace:
    """fairseq-train's options for ``argv`` on ``data`` (recorded as an absolute path, so that
    the checkpoint loads from any folder)."""
    from fairseq import options

    plugin.load()
    parser = options.get_training_parser()
    return options.parse_args_and_arch(parser, [str(Path(data).resolve()), *argv])


def command_line(options: dict) -> List[str]:
    """``{name: value}`` as ``--name-with-dashes value`` options."""
    return [text for k, v in options.items() for text in (f"--{k.replace('_', '-')}", str(v))]


def save_converted(out: Path, argv: List[str], state: dict, extra=(), tied=()) -> None:
    """``out/model.pt``: the model of fairseq-train's ``argv`` filled with ``state``
    (``converted.fill``, ``extra`` names it may add), each ``(name, source)`` of ``tied``
    sharing the tensor of ``source``."""
    args = training_args(out, argv)
    _, model = converted.build_model(args)
    state = converted.fill(model, state, extra=extra)
    for name, source in tied:
        state[name] = state[source]
    converted.save(out / "model.pt", args, state)

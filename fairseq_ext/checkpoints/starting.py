"""Starting a new model from the weights of a fairseq checkpoint: ``--init-encoder-from`` /
``--init-decoder-from`` (Wang et al. 2021, section 4.1) and ``--init-from``."""

from __future__ import annotations

import logging
from argparse import Namespace
from typing import NamedTuple, Optional

import torch
from torch import nn

from fairseq_ext.checkpoints.checks import lookup
from fairseq_ext.common.errors import require

logger = logging.getLogger(__name__)


class StartCheckpoint(NamedTuple):
    weights: dict  # the model's state dict
    options: dict  # the model options (``cfg.model`` or, in older checkpoints, ``args``)
    data: Optional[str]  # the data folder it was trained on, if it says


def load_start_checkpoint(path: str) -> StartCheckpoint:
    """The weights, model options and data folder of a fairseq checkpoint."""
    from fairseq import checkpoint_utils

    state = checkpoint_utils.load_checkpoint_to_cpu(path)
    cfg = state.get("cfg") or {}
    options = lookup(cfg, "model")
    options = options if options is not None else state.get("args")
    options = vars(options) if isinstance(options, Namespace) else dict(options or {})
    return StartCheckpoint(
        state["model"], options, lookup(lookup(cfg, "task"), "data") or options.get("data")
    )


def copy_weights(module: nn.Module, weights: dict, option: str, fix: str) -> list[str]:
    """Load ``weights`` into ``module``, a shape that differs naming ``option``; returns those
    kept new."""
    own = module.state_dict()
    for name, value in weights.items():
        require(
            value.shape == own[name].shape,
            f"{option}: {name} has shape {tuple(value.shape)} there and {tuple(own[name].shape)} "
            f"here; {fix}",
        )
    with torch.no_grad():
        module.load_state_dict(
            {**own, **{k: v.to(own[k].dtype) for k, v in weights.items()}}, strict=True
        )
    return sorted(set(own) - set(weights))


def init_part_from_checkpoint(model: nn.Module, part: str, path: str) -> None:
    """Copy a checkpoint's ``encoder.*`` or ``decoder.*`` weights into ``model``."""
    option = f"--init-{part}-from {path}"
    state = load_start_checkpoint(path).weights
    prefix = f"{part}."
    theirs = {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
    own = getattr(model, part).state_dict()
    if part == "encoder":
        missing = sorted(set(own) - set(theirs))
        require(
            not missing,
            f"{option}: the checkpoint lacks encoder weights {missing[:3]}...; it "
            "needs the same encoder architecture",
        )
    shared = {name: theirs[name] for name in own if name in theirs}
    require(
        any(".layers." in f".{name}" for name in shared),
        f"{option}: the checkpoint has no {part} layers under the names of this model",
    )
    kept = copy_weights(
        getattr(model, part),
        shared,
        option,
        f"the checkpoint needs the same {part} sizes and dictionary",
    )
    logger.info(
        "initialised the %s from %s%s",
        part,
        path,
        f" (kept new: {', '.join(kept)})" if kept else "",
    )

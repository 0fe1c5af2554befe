"""Starting a new model from the weights of a fairseq checkpoint: the one implementation behind
the plugin's checkpoint starts, ``cmlm_hybrid``'s ``--init-encoder-from`` / ``--init-decoder-from``
(an autoregressive teacher's weights, Wang et al. 2021, section 4.1) and ``unilm_transformer``'s
``--init-from`` (a BERT/RoBERTa checkpoint, Su 2019). The checkpoint is read by fairseq's loader
(so with the plugin's weights-only loading), every copied weight's shape is checked, and the
weights the model keeps new are logged. fairseq's ``--finetune-from-model`` starts the whole
model from a checkpoint of the same architecture and needs nothing of this."""

from __future__ import annotations

import logging
from argparse import Namespace
from typing import NamedTuple, Optional

import torch
from torch import nn

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
    options = cfg.get("model") if hasattr(cfg, "get") else None
    if options is None:
        options = state.get("args")
    options = (
        vars(options)
        if isinstance(options, Namespace)
        else dict(options)
        if options is not None
        else {}
    )
    task = cfg.get("task") if hasattr(cfg, "get") else None
    data = (
        task.get("data") if hasattr(task, "get") else getattr(task, "data", None)
    ) or options.get("data")
    return StartCheckpoint(state["model"], options, data)


def copy_weights(module: nn.Module, weights: dict, option: str, fix: str) -> list[str]:
    """Load ``weights`` (named as ``module``'s own) into ``module``; its parameters that
    ``weights`` lacks keep their values. A shape that differs is one error naming ``option``
    and ``fix``. Returns the names kept new."""
    own = module.state_dict()
    for name, value in weights.items():
        require(
            value.shape == own[name].shape,
            f"{option}: {name} has shape {tuple(value.shape)} there and {tuple(own[name].shape)} here; {fix}",
        )
    with torch.no_grad():
        module.load_state_dict(
            {**own, **{k: v.to(own[k].dtype) for k, v in weights.items()}}, strict=True
        )
    return sorted(set(own) - set(weights))


def init_part_from_checkpoint(model: nn.Module, part: str, path: str) -> None:
    """``--init-encoder-from`` / ``--init-decoder-from``: copy ``encoder.*`` or ``decoder.*``
    weights of a fairseq checkpoint (e.g. the autoregressive teacher) into ``model.encoder`` /
    ``model.decoder``. The encoder must match entirely; the decoder takes every weight present
    under its own name (a CMLM decoder is an autoregressive decoder without the causal mask,
    plus a length predictor that stays new). With shared embeddings this also sets the other
    side's embeddings."""
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

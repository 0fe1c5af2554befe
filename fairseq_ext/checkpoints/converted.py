"""A converted model written as the checkpoint ``fairseq-train`` would save at update 0."""

from __future__ import annotations

import logging
from argparse import Namespace
from pathlib import Path
from typing import Dict, Iterable

import torch
from torch import Tensor

from fairseq_ext.common.errors import FairseqExtError

logger = logging.getLogger(__name__)


def build_model(args: Namespace):
    from fairseq import tasks

    task = tasks.setup_task(args)
    return task, task.build_model(args)


def fill(
    model: torch.nn.Module, converted: Dict[str, Tensor], extra: Iterable[str] = ()
) -> Dict[str, Tensor]:
    """``converted`` checked against ``model``'s parameters (``extra``: names that may be added)."""
    own = model.state_dict()
    converted = dict(converted)
    for name, value in own.items():  # fairseq's format-version buffers
        if name.endswith(".version") and name not in converted:
            converted[name] = value.clone()
    missing = [k for k in own if k not in converted]
    unexpected = [k for k in converted if k not in own and k not in set(extra)]
    if missing or unexpected:
        raise FairseqExtError(
            f"conversion error: parameters missing {missing[:3]}, unexpected {unexpected[:3]}"
        )
    for name, value in own.items():
        if converted[name].shape != value.shape:
            raise FairseqExtError(
                f"conversion error: {name} has shape {tuple(converted[name].shape)}, the "
                f"model's {tuple(value.shape)}"
            )
    return {
        k: v.to(own[k].dtype if k in own else v.dtype).contiguous() for k, v in converted.items()
    }


def save(path, args: Namespace, state: Dict[str, Tensor]) -> None:
    """A fairseq checkpoint of ``state`` at update 0 (no optimizer state)."""
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from omegaconf import OmegaConf

    cfg = OmegaConf.to_container(
        convert_namespace_to_omegaconf(args), resolve=True, enum_to_str=True
    )
    checkpoint = {
        "args": None,
        "cfg": cfg,
        "model": state,
        "criterion": None,
        "optimizer_history": [
            {
                "criterion_name": str(args.criterion),
                "optimizer_name": str(args.optimizer),
                "lr_scheduler_state": {},
                "num_updates": 0,
            }
        ],
        "task_state": {},
        "extra_state": {"metrics": {}, "previous_training_time": 0},
        "last_optimizer_state": None,
    }
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    torch.save(checkpoint, str(path))
    logger.info("wrote %s", path)

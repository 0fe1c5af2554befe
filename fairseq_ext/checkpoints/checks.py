"""What a loaded checkpoint must satisfy before a model is built from it: a fairseq checkpoint,
finite weights, a task of its family and the dictionaries it was trained with."""

from __future__ import annotations

import argparse
from typing import Any, Optional

import torch

from fairseq_ext.checkpoints.dictionaries import recorded_dictionaries, task_dictionaries
from fairseq_ext.checkpoints.families import NON_AUTOREGRESSIVE, family_of
from fairseq_ext.checkpoints.shapes import dictionary_mismatch
from fairseq_ext.common.errors import FairseqExtError


def _section(cfg, name: str):
    if cfg is None:
        return None
    return cfg.get(name) if hasattr(cfg, "get") else getattr(cfg, name, None)


def _get(section, key: str, default=None):
    if section is None:
        return default
    if isinstance(section, argparse.Namespace):
        return getattr(section, key, default)
    return section.get(key, default) if hasattr(section, "get") else default


def trained_task(state: dict) -> Optional[str]:
    task = _section(state.get("cfg"), "task")
    name = _get(task, "_name")
    if name is None and state.get("args") is not None:
        name = getattr(state["args"], "task", None)
    return name


def trained_arch(state: dict) -> Optional[str]:
    model = _section(state.get("cfg"), "model")
    arch = _get(model, "arch") or _get(model, "_name")
    if arch is None and state.get("args") is not None:
        arch = getattr(state["args"], "arch", None)
    return arch


def refuse_non_checkpoint(path: str, state: Any) -> None:
    """A fairseq checkpoint is a dict with ``model`` and ``cfg`` or ``args``."""
    if isinstance(state, dict) and "model" in state and ("cfg" in state or "args" in state):
        return
    if (
        isinstance(state, dict)
        and state
        and all(isinstance(v, torch.Tensor) for v in state.values())
    ):
        what = f"a bare state dict of {len(state)} tensors"
    elif isinstance(state, dict):
        what = f"a dict with the keys {sorted(map(str, state))[:6]}" if state else "an empty dict"
    else:
        what = f"a {type(state).__name__}"
    raise FairseqExtError(
        f"{path} is not a fairseq checkpoint: it holds {what}, not 'model' with 'cfg'. Give a "
        "checkpoint written by fairseq-train (checkpoint_last.pt, checkpoint_best.pt, "
        "checkpoint_N_M.pt); weights from elsewhere are converted with 'python -m "
        "fairseq_ext.convert'"
    )


def refuse_non_finite(path: str, state: dict) -> None:
    """Every floating-point tensor of ``state["model"]`` is finite, or the first one is named."""
    for name, value in state["model"].items():
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            bad = ~torch.isfinite(value)
            if bool(bad.any()):
                raise FairseqExtError(
                    f"refusing to load {path}: {name} holds {int(bad.sum())} non-finite value(s) "
                    f"(NaN or Inf) of {value.numel()}; a model with them decodes empty or garbage "
                    "output. Use an earlier checkpoint (checkpoint_best.pt or an earlier "
                    "checkpoint_N_M.pt); if training diverged, resume from it with a lower --lr or "
                    "--clip-norm"
                )


def check_task_family(path: str, state: dict, task_name: Optional[str]) -> None:
    """A checkpoint of one task family is refused by a task of another; tasks outside the
    families are left to their own checks, except ``translation`` with a mask-predict checkpoint."""
    trained = trained_task(state)
    if task_name == "translation" and family_of(trained) == NON_AUTOREGRESSIVE:
        raise FairseqExtError(
            f"{path} was trained with --task {trained} (--arch {trained_arch(state)}); --task "
            "translation (fairseq's default when no --task is given) decodes autoregressively and "
            f"cannot use it. Give --task {trained}"
        )
    if (
        family_of(trained) is None
        or family_of(task_name) is None
        or _same_family(trained, task_name)
    ):
        return
    raise FairseqExtError(
        f"{path} was trained with --task {trained} (--arch {trained_arch(state)}); --task "
        f"{task_name} cannot use it. Give --task {trained}, or a checkpoint trained with --task "
        f"{task_name}"
    )


def _same_family(trained: Optional[str], task_name: Optional[str]) -> bool:
    return trained == task_name or (
        family_of(trained) is not None and family_of(trained) == family_of(task_name)
    )


def check_dictionaries(path: str, state: dict, task, task_name: Optional[str]) -> None:
    """The task's dictionaries are the checkpoint's (the target side only within a family)."""
    recorded = recorded_dictionaries(state)
    if not recorded:
        return
    ours = dict(task_dictionaries(task))
    trained_cfg = _section(state.get("cfg"), "task")
    trained_on, keep = _get(trained_cfg, "data"), _get(trained_cfg, "keep_tokens")
    hint = f"; it was trained on {trained_on}" if trained_on else ""
    if keep and keep != getattr(getattr(task, "cfg", None), "keep_tokens", None):
        hint += f" with --keep-tokens {keep}: give the same --keep-tokens FILE"
    sides = ("source", "target") if _same_family(trained_task(state), task_name) else ("source",)
    for side in sides:
        symbols = recorded.get(side)
        if symbols is not None and side in ours and list(ours[side].symbols) != list(symbols):
            raise dictionary_mismatch(
                side, list(symbols), list(ours[side].symbols), where=str(path), hint=hint
            )

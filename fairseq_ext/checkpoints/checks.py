"""What a loaded checkpoint must satisfy before a model is built from it: a fairseq checkpoint,
finite weights, a task of its family (tasks of one family use each other's checkpoints), the
dictionaries it was trained with, and ``--model-overrides`` that set its options to valid values."""

from __future__ import annotations

import argparse
import difflib
import math
from typing import Any, Optional

import torch

from fairseq_ext.checkpoints.dictionaries import recorded_dictionaries, task_dictionaries
from fairseq_ext.checkpoints.shapes import dictionary_mismatch
from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.common.families import FAMILIES

TASK_FAMILIES = tuple(frozenset(f.tasks + f.fairseq_tasks) for f in FAMILIES)
# fairseq's `translation` cannot decode them
NON_AUTOREGRESSIVE = frozenset(
    t for f in FAMILIES if not f.autoregressive for t in f.tasks + f.fairseq_tasks
)


def family_of(task_name: Optional[str]) -> Optional[frozenset]:
    return next((family for family in TASK_FAMILIES if task_name in family), None)


def lookup(section, key: str, default=None):
    """``key`` of an ``argparse.Namespace`` or of a dict-like section (None: ``default``)."""
    if isinstance(section, argparse.Namespace):
        return getattr(section, key, default)
    return section.get(key, default) if hasattr(section, "get") else default


def option(cfg, group: str, name: str) -> Any:
    """An option of a command's configuration: an ``argparse.Namespace`` (flat) or fairseq's
    ``DictConfig`` (in groups)."""
    return lookup(cfg if isinstance(cfg, argparse.Namespace) else lookup(cfg, group), name)


def trained_task(state: dict) -> Optional[str]:
    name = lookup(lookup(state.get("cfg"), "task"), "_name")
    return name if name is not None else getattr(state.get("args"), "task", None)


def trained_arch(state: dict) -> Optional[str]:
    model = lookup(state.get("cfg"), "model")
    arch = lookup(model, "arch") or lookup(model, "_name")
    return arch if arch is not None else getattr(state.get("args"), "arch", None)


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


def _same_family(trained: Optional[str], task_name: Optional[str]) -> bool:
    family = family_of(trained)
    return trained == task_name or (family is not None and family == family_of(task_name))


def check_task_family(path: str, state: dict, task_name: Optional[str]) -> None:
    """A checkpoint of one task family is refused by a task of another; tasks outside the
    families are left to their own checks, except ``translation`` with a mask-predict checkpoint."""
    trained = trained_task(state)
    said = f"{path} was trained with --task {trained} (--arch {trained_arch(state)}); --task"
    if task_name == "translation" and family_of(trained) == NON_AUTOREGRESSIVE:
        raise FairseqExtError(
            f"{said} translation (fairseq's default when no --task is given) decodes "
            f"autoregressively and cannot use it. Give --task {trained}"
        )
    if None in (family_of(trained), family_of(task_name)) or _same_family(trained, task_name):
        return
    raise FairseqExtError(
        f"{said} {task_name} cannot use it. Give --task {trained}, or a checkpoint trained with "
        f"--task {task_name}"
    )


def check_dictionaries(path: str, state: dict, task, task_name: Optional[str]) -> None:
    """The task's dictionaries are the checkpoint's (the target side only within a family)."""
    recorded = recorded_dictionaries(state)
    if not recorded:
        return
    ours = dict(task_dictionaries(task))
    trained_cfg = lookup(state.get("cfg"), "task")
    trained_on, keep = lookup(trained_cfg, "data"), lookup(trained_cfg, "keep_tokens")
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


def _known_options(state: dict) -> dict[str, Any]:
    """Every option the checkpoint records: its ``cfg`` sections, then ``args``."""
    cfg = state.get("cfg")
    sections = [cfg.get(k) for k in cfg.keys()] if hasattr(cfg, "keys") else []
    known: dict[str, Any] = {}
    for section in [*sections, state.get("args")]:
        if isinstance(section, argparse.Namespace):
            section = vars(section)
        if hasattr(section, "items") and not isinstance(section, str):
            for key, value in section.items():
                known.setdefault(key, value)
    return known


class _ActionsByDest(argparse.ArgumentParser):
    """A parser that keeps each action ``add_argument`` returns, by ``dest`` (a later one wins)."""

    def __init__(self):
        super().__init__(add_help=False, conflict_handler="resolve")
        self.by_dest: dict[str, argparse.Action] = {}

    def add_argument(self, *args, **kwargs):
        action = super().add_argument(*args, **kwargs)
        self.by_dest[action.dest] = action
        return action


def _option_actions(state: dict) -> dict[str, argparse.Action]:
    """The argparse actions of the checkpoint's model and task options, by ``dest``."""
    from fairseq.models import ARCH_MODEL_REGISTRY
    from fairseq.tasks import TASK_REGISTRY

    parser = _ActionsByDest()
    for cls in (
        ARCH_MODEL_REGISTRY.get(trained_arch(state)),
        TASK_REGISTRY.get(trained_task(state)),
    ):
        try:
            cls.add_args(parser)
        except Exception:  # no class, or an option table fairseq cannot rebuild: nothing to check
            continue
    return parser.by_dest


def _value_problem(
    key: str, value: Any, current: Any, action: Optional[argparse.Action]
) -> Optional[str]:
    if action is not None and action.choices is not None and value not in action.choices:
        return f"must be one of {', '.join(map(str, action.choices))}"
    flag = action is not None and isinstance(action.const, bool) and action.nargs == 0
    if isinstance(current, bool) or flag:
        return None if isinstance(value, bool) else "must be True or False"
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(current, int):
        return None if number and isinstance(value, int) else "must be an integer"
    if isinstance(current, float):
        if not number:
            return "must be a number"
        return None if math.isfinite(value) else "must be a finite number"
    if isinstance(current, str) and not isinstance(value, str):
        return "must be a string"
    if (
        action is not None
        and callable(action.type)
        and action.type is not str
        and value is not None
    ):
        try:
            action.type(str(value))
        except (TypeError, ValueError, argparse.ArgumentTypeError):
            return f"is not a valid value of --{key.replace('_', '-')}"
    return None


def check_model_overrides(path: str, state: dict, overrides: Optional[dict]) -> None:
    """``--model-overrides`` may only set options the checkpoint has, to values of their type
    (and among their choices); fairseq ignores a typo and fails on a bad value only when used."""
    known = _known_options(state) if overrides else {}
    actions = None
    for key, value in (overrides or {}).items():
        if key not in known:
            names = [k for k in known if not k.startswith("_")]
            close = difflib.get_close_matches(key, names, n=1, cutoff=0.75)
            guess = f" (did you mean {close[0]!r}?)" if close else ""
            raise FairseqExtError(
                f"--model-overrides: {key!r} is not an option of {path}{guess}; keys are option "
                f"names with underscores, e.g. \"{{'iter_decode_max_iter': 4}}\""
            )
        actions = _option_actions(state) if actions is None else actions
        problem = _value_problem(key, value, known[key], actions.get(key))
        if problem is not None:
            raise FairseqExtError(f"--model-overrides: {key} {problem}, got {value!r}")

"""``--model-overrides`` checked against the checkpoint it overrides."""

from __future__ import annotations

import argparse
import difflib
import math
from typing import Any, Optional

from fairseq_ext.checkpoints.checks import trained_arch, trained_task
from fairseq_ext.common.errors import FairseqExtError


def _known_options(state: dict) -> dict[str, Any]:
    known: dict[str, Any] = {}
    sections = []
    cfg = state.get("cfg")
    if cfg is not None:
        sections = [cfg.get(k) for k in cfg.keys()] if hasattr(cfg, "keys") else []
    if state.get("args") is not None:
        sections.append(state["args"])
    for section in sections:
        if isinstance(section, argparse.Namespace):
            items = vars(section).items()
        elif hasattr(section, "items") and not isinstance(section, str):
            items = section.items()
        else:
            continue
        for key, value in items:
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
    for registry, name in (
        (ARCH_MODEL_REGISTRY, trained_arch(state)),
        (TASK_REGISTRY, trained_task(state)),
    ):
        cls = registry.get(name) if name else None
        if cls is not None and hasattr(cls, "add_args"):
            try:
                cls.add_args(parser)
            except Exception:  # an option table fairseq cannot rebuild: no choices to check
                continue
    return parser.by_dest


def _value_problem(
    key: str, value: Any, current: Any, action: Optional[argparse.Action]
) -> Optional[str]:
    if action is not None and action.choices is not None and value not in action.choices:
        return f"must be one of {', '.join(map(str, action.choices))}"
    if isinstance(current, bool) or (
        action is not None and isinstance(action.const, bool) and action.nargs == 0
    ):
        return None if isinstance(value, bool) else "must be True or False"
    if isinstance(current, int):
        return (
            None if isinstance(value, int) and not isinstance(value, bool) else "must be an integer"
        )
    if isinstance(current, float):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return "must be a number"
        return None if math.isfinite(value) else "must be a finite number"
    if isinstance(current, str) and not isinstance(value, str):
        return "must be a string"
    if (
        action is not None
        and callable(action.type)
        and action.type not in (str,)
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
    if not overrides:
        return
    known = _known_options(state)
    actions = None
    for key, value in overrides.items():
        if key not in known:
            close = difflib.get_close_matches(
                key, [k for k in known if not k.startswith("_")], n=1, cutoff=0.75
            )
            guess = f" (did you mean {close[0]!r}?)" if close else ""
            raise FairseqExtError(
                f"--model-overrides: {key!r} is not an option of {path}{guess}; keys are option "
                f"names with underscores, e.g. \"{{'iter_decode_max_iter': 4}}\""
            )
        if actions is None:
            actions = _option_actions(state)
        problem = _value_problem(key, value, known[key], actions.get(key))
        if problem is not None:
            raise FairseqExtError(f"--model-overrides: {key} {problem}, got {value!r}")

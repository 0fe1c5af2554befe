"""What a loaded checkpoint must satisfy before a model is built from it: a fairseq checkpoint
(a dict with ``model`` and ``cfg``/``args``), finite weights, ``--model-overrides`` keys and
values the checkpoint knows, a task of the family that trained it, and the dictionaries it was
trained with.

fairseq compares a checkpoint with the data only through the embedding shapes: data binarized
with a dictionary of the same size but another order (``fairseq-preprocess`` without
``--srcdict`` on a corpus that covers every piece) loads without a word and decodes garbage.
So a checkpoint saved with the plugin loaded records the symbols of its task's dictionaries,
in order (``record_dictionaries``; ``"dictionaries"`` in the checkpoint), and every load for a
task (``fairseq-generate``/``-interactive``, ``--finetune-from-model``, resuming) compares them
with the task's (``check_dictionaries``). Checkpoints without the record (older ones) keep the
size check of ``models/compat.py``. ``checkpoints.install`` calls these checks.
"""
from __future__ import annotations

import argparse
import difflib
import math
from typing import Any, Iterable, Optional

import torch

from fairseq_ext.errors import FairseqExtError
from fairseq_ext.models.compat import dictionary_mismatch

RECORD_KEY = "dictionaries"

# Tasks that train and decode the same models: a checkpoint of one may be used by another of
# its group (pre-training -> fine-tuning), never by a task of another group.
NON_AUTOREGRESSIVE = frozenset({"cmlm_hybrid", "translation_lev"})  # fairseq's `translation` cannot decode them
TASK_FAMILIES = (
    NON_AUTOREGRESSIVE,
    frozenset({"translation_prophetnet", "prophetnet_denoising"}),
    frozenset({"unilm_seq2seq", "permutation_lm"}),
    frozenset({"position_masked_lm", "masked_lm"}),
)


def _sides(task) -> Iterable[tuple[str, Any]]:
    for side, attribute in (("source", "source_dictionary"), ("target", "target_dictionary")):
        try:
            dictionary = getattr(task, attribute)
        except (NotImplementedError, AttributeError):
            continue
        if dictionary is not None:
            yield side, dictionary


def record_dictionaries(task) -> dict[str, list[str]]:
    """``{side: symbols}`` of the task's source and target dictionaries, for the checkpoint."""
    return {side: list(dictionary.symbols) for side, dictionary in _sides(task)}


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


def _task_name(state: dict) -> Optional[str]:
    task = _section(state.get("cfg"), "task")
    name = _get(task, "_name")
    if name is None and state.get("args") is not None:
        name = getattr(state["args"], "task", None)
    return name


def _arch(state: dict) -> Optional[str]:
    model = _section(state.get("cfg"), "model")
    arch = _get(model, "arch") or _get(model, "_name")
    if arch is None and state.get("args") is not None:
        arch = getattr(state["args"], "arch", None)
    return arch


def refuse_non_checkpoint(path: str, state: Any) -> None:
    """A fairseq checkpoint is a dict with ``model`` and ``cfg`` or ``args``."""
    if isinstance(state, dict) and "model" in state and ("cfg" in state or "args" in state):
        return
    if isinstance(state, dict) and state and all(isinstance(v, torch.Tensor) for v in state.values()):
        what = f"a bare state dict of {len(state)} tensors"
    elif isinstance(state, dict):
        what = f"a dict with the keys {sorted(map(str, state))[:6]}" if state else "an empty dict"
    else:
        what = f"a {type(state).__name__}"
    raise FairseqExtError(
        f"{path} is not a fairseq checkpoint: it holds {what}, not 'model' with 'cfg'. Give a checkpoint "
        "written by fairseq-train (checkpoint_last.pt, checkpoint_best.pt, checkpoint_N_M.pt); weights from "
        "elsewhere are converted with 'python -m fairseq_ext.convert'")


def refuse_non_finite(path: str, state: dict) -> None:
    """Every floating-point tensor of ``state["model"]`` is finite; the first one that is not is
    named."""
    for name, value in state["model"].items():
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            bad = ~torch.isfinite(value)
            if bool(bad.any()):
                raise FairseqExtError(
                    f"refusing to load {path}: {name} holds {int(bad.sum())} non-finite value(s) (NaN or Inf) "
                    f"of {value.numel()}; a model with them decodes empty or garbage output. Use an earlier "
                    "checkpoint (checkpoint_best.pt or an earlier checkpoint_N_M.pt); if training diverged, "
                    "resume from it with a lower --lr or --clip-norm")


def _known_options(state: dict) -> dict[str, Any]:
    """Every option name the checkpoint's configuration holds, with its value."""
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


def _option_actions(state: dict) -> dict[str, argparse.Action]:
    """The argparse actions of the checkpoint's model and task options, by ``dest``."""
    from fairseq.models import ARCH_MODEL_REGISTRY
    from fairseq.tasks import TASK_REGISTRY

    parser = argparse.ArgumentParser(add_help=False, conflict_handler="resolve")
    for registry, name in ((ARCH_MODEL_REGISTRY, _arch(state)), (TASK_REGISTRY, _task_name(state))):
        cls = registry.get(name) if name else None
        if cls is not None and hasattr(cls, "add_args"):
            try:
                cls.add_args(parser)
            except Exception:  # an option table fairseq cannot rebuild: no choices to check
                continue
    return {a.dest: a for a in parser._actions}


def _value_problem(key: str, value: Any, current: Any, action: Optional[argparse.Action]) -> Optional[str]:
    if action is not None and action.choices is not None and value not in action.choices:
        return f"must be one of {', '.join(map(str, action.choices))}"
    if isinstance(current, bool) or (action is not None and isinstance(action.const, bool) and action.nargs == 0):
        return None if isinstance(value, bool) else "must be True or False"
    if isinstance(current, int):
        return None if isinstance(value, int) and not isinstance(value, bool) else "must be an integer"
    if isinstance(current, float):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return "must be a number"
        return None if math.isfinite(value) else "must be a finite number"
    if isinstance(current, str) and not isinstance(value, str):
        return "must be a string"
    if action is not None and callable(action.type) and action.type not in (str,) and value is not None:
        try:
            action.type(str(value))
        except (TypeError, ValueError, argparse.ArgumentTypeError):
            return f"is not a valid value of --{key.replace('_', '-')}"
    return None


def check_model_overrides(path: str, state: dict, overrides: Optional[dict]) -> None:
    """``--model-overrides`` may only set options the checkpoint has, to values of their type
    (and among their choices). fairseq sets an unknown key without a word, so a typo is
    ignored, and a bad value fails only when decoding uses it."""
    if not overrides:
        return
    known = _known_options(state)
    actions = None
    for key, value in overrides.items():
        if key not in known:
            close = difflib.get_close_matches(key, [k for k in known if not k.startswith("_")], n=1, cutoff=0.75)
            guess = f" (did you mean {close[0]!r}?)" if close else ""
            raise FairseqExtError(
                f"--model-overrides: {key!r} is not an option of {path}{guess}; keys are option names with "
                "underscores, e.g. \"{'iter_decode_max_iter': 4}\"")
        if actions is None:
            actions = _option_actions(state)
        problem = _value_problem(key, value, known[key], actions.get(key))
        if problem is not None:
            raise FairseqExtError(f"--model-overrides: {key} {problem}, got {value!r}")


def check_task_family(path: str, state: dict, task_name: Optional[str]) -> None:
    """A checkpoint trained by a task of one group of ``TASK_FAMILIES`` is refused by a task of
    another (its model cannot do that task; the dictionaries would be compared in vain). Tasks
    outside the groups (fairseq's ``sentence_prediction`` fine-tuning a position-masked encoder)
    are left to their own checks, except ``translation`` (fairseq's default task) with a
    mask-predict checkpoint."""
    trained = _task_name(state)
    if task_name == "translation" and trained in NON_AUTOREGRESSIVE:
        raise FairseqExtError(
            f"{path} was trained with --task {trained} (--arch {_arch(state)}); --task translation (fairseq's "
            f"default when no --task is given) decodes autoregressively and cannot use it. Give --task {trained}")
    if not any(trained in g for g in TASK_FAMILIES) or not any(task_name in g for g in TASK_FAMILIES):
        return
    if _same_family(trained, task_name):
        return
    raise FairseqExtError(
        f"{path} was trained with --task {trained} (--arch {_arch(state)}); --task {task_name} cannot use it. "
        f"Give --task {trained}, or a checkpoint trained with --task {task_name}")


def _same_family(trained: Optional[str], task_name: Optional[str]) -> bool:
    return trained == task_name or any(trained in g and task_name in g for g in TASK_FAMILIES)


def check_dictionaries(path: str, state: dict, task, task_name: Optional[str]) -> None:
    """The task's dictionaries are the ones the checkpoint was trained with, symbol by symbol
    (nothing to compare for a checkpoint without the record). The target side is compared
    only within a task family: another task (e.g. ``sentence_prediction`` fine-tuning a
    ``position_masked_lm`` checkpoint) has targets of its own."""
    recorded = state.get(RECORD_KEY)
    if not recorded:
        return
    ours = dict(_sides(task))
    trained_task = _section(state.get("cfg"), "task")
    trained_on, keep = _get(trained_task, "data"), _get(trained_task, "keep_tokens")
    hint = f"; it was trained on {trained_on}" if trained_on else ""
    if keep and keep != getattr(getattr(task, "cfg", None), "keep_tokens", None):
        hint += f" with --keep-tokens {keep}: give the same --keep-tokens FILE"
    sides = ("source", "target") if _same_family(_task_name(state), task_name) else ("source",)
    for side in sides:
        symbols = recorded.get(side)
        if symbols is not None and side in ours and list(ours[side].symbols) != list(symbols):
            raise dictionary_mismatch(side, list(symbols), list(ours[side].symbols), where=str(path), hint=hint)

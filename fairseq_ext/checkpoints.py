"""Safe checkpoint loading: torch's ``weights_only=True`` unpickler plus an exact allow-list.

fairseq calls ``torch.load`` without ``weights_only``, which torch >= 2.6 treats as
``weights_only=True``: any pickled global outside torch's own safe set is refused. The
checkpoints that fairseq writes for this plugin's models contain exactly these globals
(measured by ``tests/test_checkpoints.py`` for every checkpoint kind the plugin writes):

* ``argparse.Namespace``: the legacy ``args`` of argparse-configured models, also nested
  in ``cfg``; every checkpoint has it;
* numpy's array reconstruction (``ndarray``, ``dtype``, ``_reconstruct`` and the int64
  dtype class): fairseq's ``--eval-bleu`` keeps its n-gram counts as int64 arrays in the
  saved metrics.

``install()`` allow-lists exactly ``SAFE_CHECKPOINT_GLOBALS`` and makes the loader answer a
foreign, corrupt or truncated checkpoint (corrupt told apart from malicious), a file that is no
fairseq checkpoint and one with non-finite weights with one clear message; every load stays
weights-only. A load for a task
(``fairseq-generate``/``-interactive``, resuming, ``--finetune-from-model``) also checks
``--model-overrides``, the task family and the dictionaries (``checkpoint_checks``); a saved
checkpoint records its task's dictionaries. ``install()`` also makes fairseq's checkpoint
saving safe (``checkpoint_saving``: atomic copies, leftovers removed, a lost
``checkpoint_last.pt`` restored, a full disk named). ``fairseq_compat.install`` calls it;
importing this module changes nothing.

Command line:
    python -m fairseq_ext.checkpoints inspect CKPT        # globals a checkpoint (or a raw pickle) pickles
    python -m fairseq_ext.checkpoints export CKPT OUT [--fp16]   # weights-only copy
"""
from __future__ import annotations

import argparse
import contextvars
import functools
import os
import pickle
import pickletools
import re
import zipfile
from typing import Any, Optional

import numpy as np
import torch
from torch import _weights_only_unpickler

from fairseq_ext import quiet

if __name__ == "__main__":  # before the imports below import fairseq
    quiet.hush_command()

from fairseq_ext import checkpoint_checks, checkpoint_saving  # noqa: E402
from fairseq_ext.errors import FairseqExtError, note  # noqa: E402
from fairseq_ext.output_files import exclusive_output  # noqa: E402


def _numpy_reconstruct():
    try:
        from numpy._core.multiarray import _reconstruct  # numpy >= 2
    except ImportError:
        from numpy.core.multiarray import _reconstruct  # numpy 1.x
    return _reconstruct


SAFE_CHECKPOINT_GLOBALS: tuple = (
    argparse.Namespace,
    np.ndarray,
    np.dtype,
    type(np.dtype(np.int64)),
    _numpy_reconstruct(),
)


class UnsafeCheckpointError(FairseqExtError):
    """The checkpoint pickles a global that is not on the allow-list."""


class CorruptCheckpointError(FairseqExtError):
    """The checkpoint file is truncated or not a torch checkpoint."""


def _static_pickle_globals(path: str) -> Optional[set[str]]:
    """The globals named by the pickles at the start of a file that is no zip archive (a raw
    pickle; torch's legacy format: five pickles, then raw storage bytes), read with
    ``pickletools`` (nothing is run); None when the file does not start with a pickle."""
    found: set[str] = set()
    complete = 0
    with open(path, "rb") as f:
        for _ in range(5):
            names, strings = set(), []
            try:
                for op, arg, _pos in pickletools.genops(f):
                    if op.name == "GLOBAL":
                        names.add(arg.replace(" ", "."))
                    elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
                        names.add(f"{strings[-2]}.{strings[-1]}")
                    elif isinstance(arg, str):
                        strings.append(arg)
            except Exception:  # not (or no longer) a pickle
                break
            found |= names
            complete += 1
    return found if complete else None


def pickled_globals(path: str) -> list[str]:
    """Every global pickled in ``path`` beyond torch's built-in safe set (the allow-list
    is ignored for this listing); also for raw pickles and torch's legacy format."""
    _require_file(path)
    if not zipfile.is_zipfile(path):
        found = _static_pickle_globals(path)
        if found is None:
            raise CorruptCheckpointError(
                f"cannot read checkpoint {path}: it is neither a torch checkpoint (a zip archive) nor a pickle. "
                "The file is corrupt or not a checkpoint; use a checkpoint written by fairseq-train")
        return sorted(found - set(_weights_only_unpickler._get_allowed_globals()))
    registered = torch.serialization.get_safe_globals()
    torch.serialization.clear_safe_globals()
    try:
        return sorted(torch.serialization.get_unsafe_globals_in_checkpoint(path))
    finally:
        torch.serialization.add_safe_globals(registered)


def unsafe_globals(path: str) -> list[str]:
    """Globals pickled in ``path`` that are not on ``SAFE_CHECKPOINT_GLOBALS``."""
    allowed = {f"{g.__module__}.{g.__qualname__}" for g in SAFE_CHECKPOINT_GLOBALS}
    return [g for g in pickled_globals(path) if g not in allowed]


def _require_file(path: str) -> None:
    if os.path.isdir(path):
        raise FairseqExtError(f"checkpoint {path} is a folder, not a file; give a checkpoint file in it, e.g. "
                              f"{os.path.join(path, 'checkpoint_best.pt')}")
    if not os.path.exists(path):
        raise FairseqExtError(f"checkpoint {path} does not exist; check the --path/--restore-file argument")


def _explain_failure(path: str, exc: BaseException) -> FairseqExtError:
    """Unsafe when the file pickles a global outside the allow-list, corrupt otherwise."""
    try:
        names = unsafe_globals(path)
    except FairseqExtError:  # neither a zip archive nor a pickle
        names = []
    # torch's message names the global; its advice to switch the safe loading off is not repeated
    names = names or list(dict.fromkeys(re.findall(r"GLOBAL ([\w.]+)", str(exc))))
    if names:
        return UnsafeCheckpointError(
            f"refusing to load {path}: it pickles {', '.join(names)}, which fairseq_ext does not allow "
            "(a pickled global can run code when loaded). Use a checkpoint written by "
            "fairseq-train, or re-save a trusted one as plain tensors with "
            "'python -m fairseq_ext.checkpoints export'."
        )
    return CorruptCheckpointError(
        f"cannot read checkpoint {path}: it is {_kind_of_unreadable(path)} ({type(exc).__name__}: {_reason(exc)}). "
        "Not malicious: it pickles no foreign global, and nothing in it was run. Use another "
        "checkpoint, e.g. checkpoint_best.pt or an earlier checkpoint_N_M.pt."
    )


def _kind_of_unreadable(path: str) -> str:
    with open(path, "rb") as f:
        zip_header = f.read(4) == b"PK\x03\x04"
    if zip_header:
        return "a torch checkpoint (a zip archive) that is truncated or corrupt (an interrupted copy or save?)"
    if _static_pickle_globals(path) is not None:
        return ("a pickle that the weights-only loader cannot read (a raw pickle, or torch's legacy format), "
                "not a checkpoint fairseq-train writes")
    return "neither a torch checkpoint (a zip archive) nor a pickle: corrupt, or not a checkpoint"


def _reason(exc: BaseException) -> str:
    """torch's reason in a few words, without its advice to turn the weights-only loading off."""
    text = str(exc).strip()
    detail = re.search(r"WeightsUnpickler error:\s*(\S[^\n]*)", text)
    return detail.group(1).strip() if detail else text.split(". ")[0].splitlines()[0].rstrip(".") if text else ""


def safe_load(path: str) -> dict[str, Any]:
    """``torch.load(path, weights_only=True)`` on CPU, with the allow-list and clear errors."""
    _require_file(path)
    # add_safe_globals, not the safe_globals context manager: the latter removes its entries on
    # exit, which would undo install() for every later load in the same process.
    torch.serialization.add_safe_globals(list(SAFE_CHECKPOINT_GLOBALS))
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # random bytes fail with any of IndexError, KeyError, RuntimeError, ...
        raise _explain_failure(path, exc) from None


# (task, paths) of the load under way for a task: set by ``_loading_for_task`` around fairseq's
# two loaders that know the task, read by the guarded ``load_checkpoint_to_cpu``
_LOADING_FOR: contextvars.ContextVar[Optional[tuple]] = contextvars.ContextVar("fairseq_ext_loading_for",
                                                                             default=None)


def _apply_overrides(state: dict, overrides: dict) -> None:
    """What fairseq's ``load_checkpoint_to_cpu`` does with ``arg_overrides``."""
    from fairseq.dataclass.utils import overwrite_args_by_name

    if state.get("args") is not None:
        for key, value in overrides.items():
            setattr(state["args"], key, value)
    if state.get("cfg") is not None:
        overwrite_args_by_name(state["cfg"], overrides)


def _check_loaded(path: str, state: dict, arg_overrides: Optional[dict]) -> None:
    checkpoint_checks.refuse_non_finite(path, state)
    loading = _LOADING_FOR.get()
    if loading is None:
        return
    task, paths = loading
    if task is None or os.path.abspath(path) not in paths:
        return
    checkpoint_checks.check_model_overrides(path, state, arg_overrides)
    task_name = getattr(getattr(task, "cfg", None), "_name", None)
    checkpoint_checks.check_task_family(path, state, task_name)
    checkpoint_checks.check_dictionaries(path, state, task, task_name)


def _guard_loader(load_fn):
    @functools.wraps(load_fn)
    def load_checkpoint_to_cpu(path, arg_overrides=None, load_on_all_ranks=False):
        try:
            state = load_fn(path, None, load_on_all_ranks)
        except Exception as exc:
            if isinstance(exc, FairseqExtError) or "://" in str(path):
                raise
            # an unreadable file, or fairseq's upgrade of something that is no checkpoint: say which
            checkpoint_checks.refuse_non_checkpoint(path, safe_load(path))
            raise
        checkpoint_checks.refuse_non_checkpoint(path, state)
        _check_loaded(path, state, arg_overrides)
        if arg_overrides:
            _apply_overrides(state, arg_overrides)
        return state

    load_checkpoint_to_cpu.fairseq_ext_guarded = True
    return load_checkpoint_to_cpu


def _loading_for_task(fn, task_of, paths_of):
    """Wrap a fairseq loader that knows the task, so that the guarded ``load_checkpoint_to_cpu``
    checks the checkpoint of ``paths_of(...)`` against ``task_of(...)``."""

    @functools.wraps(fn)
    def loader(*args, **kwargs):
        paths = {os.path.abspath(p) for p in paths_of(*args, **kwargs)}
        token = _LOADING_FOR.set((task_of(*args, **kwargs), paths))
        try:
            return fn(*args, **kwargs)
        finally:
            _LOADING_FOR.reset(token)

    loader.fairseq_ext_checked = True
    return loader


def _ensemble_task(filenames, arg_overrides=None, task=None, *args, **kwargs):
    return task


def _ensemble_paths(filenames, *args, **kwargs):
    return list(filenames)


def _trainer_task(trainer, *args, **kwargs):
    return trainer.task


def _trainer_path(trainer, filename, *args, **kwargs):
    return [filename]


def _recording_dictionaries(state_dict_fn):
    """``Trainer.state_dict`` that also records the task's dictionaries (``checkpoint_checks``)."""

    @functools.wraps(state_dict_fn)
    def state_dict(self):
        state = state_dict_fn(self)
        if self.task is not None:
            state[checkpoint_checks.RECORD_KEY] = checkpoint_checks.record_dictionaries(self.task)
        return state

    state_dict.fairseq_ext_records = True
    return state_dict


def install() -> None:
    """Allow-list ``SAFE_CHECKPOINT_GLOBALS`` for torch's weights-only loader, make fairseq's
    checkpoint loader report unsafe, corrupt, foreign or non-finite files clearly and check a
    checkpoint against the task it is loaded for, record the dictionaries in every saved
    checkpoint, and make saving safe (``checkpoint_saving.install``). Idempotent."""
    from fairseq import checkpoint_utils
    from fairseq.trainer import Trainer

    torch.serialization.add_safe_globals(list(SAFE_CHECKPOINT_GLOBALS))
    if not getattr(checkpoint_utils.load_checkpoint_to_cpu, "fairseq_ext_guarded", False):
        checkpoint_utils.load_checkpoint_to_cpu = _guard_loader(checkpoint_utils.load_checkpoint_to_cpu)
    if not getattr(checkpoint_utils.load_model_ensemble_and_task, "fairseq_ext_checked", False):
        checkpoint_utils.load_model_ensemble_and_task = _loading_for_task(
            checkpoint_utils.load_model_ensemble_and_task, _ensemble_task, _ensemble_paths)
    if not getattr(Trainer.load_checkpoint, "fairseq_ext_checked", False):
        Trainer.load_checkpoint = _loading_for_task(Trainer.load_checkpoint, _trainer_task, _trainer_path)
    if not getattr(Trainer.state_dict, "fairseq_ext_records", False):
        Trainer.state_dict = _recording_dictionaries(Trainer.state_dict)
    checkpoint_saving.install()


def export_weights(src: str, dst: str, fp16: bool = False) -> None:
    """Write a small checkpoint with the model weights and config only (no optimizer state),
    loadable by ``fairseq-generate --path`` and ``fairseq-train --finetune-from-model``."""
    state = safe_load(src)
    model = {k: (v.half() if fp16 and v.is_floating_point() else v) for k, v in state["model"].items()}
    cfg = state.get("cfg")
    if cfg is not None:  # where this checkpoint was initialised from is local history
        for section in (cfg.get("model"), cfg.get("task")):
            for key in ("init_encoder_from", "init_decoder_from"):
                if isinstance(section, argparse.Namespace) and hasattr(section, key):
                    setattr(section, key, None)
                elif isinstance(section, dict) and key in section:
                    section[key] = None
    history = state.get("optimizer_history", [])[-1:]
    # No metrics (numpy arrays) and no previous_training_time: a run that starts from this
    # file must not count the pre-training time against its own --stop-time-hours.
    extra = {"train_iterator": {"version": 2, "epoch": 1, "iterations_in_epoch": 0, "shuffle": True}}
    out = {"args": state.get("args"), "cfg": cfg, "model": model, "optimizer_history": history,
           "extra_state": extra}
    if checkpoint_checks.RECORD_KEY in state:
        out[checkpoint_checks.RECORD_KEY] = state[checkpoint_checks.RECORD_KEY]
    with exclusive_output(dst, "wb", option="output path") as f:  # no half file, no second writer
        torch.save(out, f)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m fairseq_ext.checkpoints", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("inspect", help="list the pickled globals of a checkpoint")
    i.add_argument("checkpoint")
    e = sub.add_parser("export", help="write a weights-only copy")
    e.add_argument("checkpoint")
    e.add_argument("output")
    e.add_argument("--fp16", action="store_true", help="store floating-point weights in fp16")
    for command in (i, e):
        command.add_argument("--verbose", action="store_true", help=quiet.VERBOSE_HELP)
    args = p.parse_args(argv)
    if args.cmd == "inspect":
        found = pickled_globals(args.checkpoint)
        if not zipfile.is_zipfile(args.checkpoint):
            note(f"{args.checkpoint} is not in the zip format of torch.save (a raw pickle, or torch's legacy "
                 "format): these are the globals its pickles name, read without running them")
        bad = unsafe_globals(args.checkpoint)
        for g in found:
            print(f"{g}\t{'REFUSED' if g in bad else 'allowed'}")
    else:
        export_weights(args.checkpoint, args.output, fp16=args.fp16)
        print(f"wrote {args.output} ({os.path.getsize(args.output) / 1e6:.1f} MB)")


if __name__ == "__main__":
    from fairseq_ext.errors import install_cli_excepthook

    install_cli_excepthook()
    main()

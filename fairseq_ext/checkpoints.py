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
foreign, corrupt or truncated checkpoint with one clear message; every load stays
weights-only. ``install()`` also makes fairseq's checkpoint copies atomic (``_atomic_copy``).
Loading the plugin (``fairseq_ext.plugin.load``, which ``--user-dir fairseq_ext`` runs) calls
it; importing this module changes nothing.

Command line:
    python -m fairseq_ext.checkpoints inspect CKPT        # globals a checkpoint pickles
    python -m fairseq_ext.checkpoints export CKPT OUT [--fp16]   # weights-only copy
"""
from __future__ import annotations

import argparse
import functools
import os
import pickle
import shutil
import zipfile
from typing import Any

import numpy as np
import torch

from fairseq_ext.errors import FairseqExtError


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


def pickled_globals(path: str) -> list[str]:
    """Every global pickled in ``path`` beyond torch's built-in safe set (the allow-list
    is ignored for this listing)."""
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


def _explain_failure(path: str, exc: BaseException) -> FairseqExtError:
    if isinstance(exc, pickle.UnpicklingError):
        try:
            names = ", ".join(unsafe_globals(path)) or str(exc).splitlines()[0]
        except Exception:  # the listing itself failed: the file is not a readable checkpoint
            names = str(exc).splitlines()[0]
        return UnsafeCheckpointError(
            f"refusing to load {path}: it pickles {names}, which fairseq_ext does not allow "
            "(a pickled global can run code when loaded). Use a checkpoint written by "
            "fairseq-train, or re-save a trusted one as plain tensors with "
            "'python -m fairseq_ext.checkpoints export'."
        )
    return CorruptCheckpointError(
        f"cannot read checkpoint {path}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}. "
        "The file is truncated or corrupt (an interrupted copy or save?); use another "
        "checkpoint, e.g. checkpoint_best.pt or an earlier checkpoint_N_M.pt."
    )


def safe_load(path: str) -> dict[str, Any]:
    """``torch.load(path, weights_only=True)`` on CPU, with the allow-list and clear errors."""
    if not os.path.exists(path):
        raise FairseqExtError(f"checkpoint {path} does not exist; check the --path/--restore-file argument")
    # add_safe_globals, not the safe_globals context manager: the latter removes its entries on
    # exit, which would undo install() for every later load in the same process.
    torch.serialization.add_safe_globals(list(SAFE_CHECKPOINT_GLOBALS))
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, zipfile.BadZipFile, ValueError) as exc:
        raise _explain_failure(path, exc) from None


def _guard_loader(load_fn):
    @functools.wraps(load_fn)
    def load_checkpoint_to_cpu(path, *args, **kwargs):
        try:
            return load_fn(path, *args, **kwargs)
        except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, zipfile.BadZipFile) as exc:
            if isinstance(exc, FileNotFoundError):
                raise FairseqExtError(f"checkpoint {path} does not exist; check --path/--restore-file") from None
            if isinstance(exc, RuntimeError) and not _is_read_error(exc):
                raise
            raise _explain_failure(path, exc) from None

    load_checkpoint_to_cpu.fairseq_ext_guarded = True
    return load_checkpoint_to_cpu


def _is_read_error(exc: RuntimeError) -> bool:
    text = str(exc)
    return any(s in text for s in ("PytorchStreamReader", "zip archive", "Weights only load failed",
                                   "unexpected EOF", "invalid load key"))


def _atomic_copy(copy_fn):
    """fairseq writes ``checkpoint_N.pt`` atomically (temp file, then rename) but then *copies*
    it over ``checkpoint_last.pt``/``checkpoint_best.pt`` in place: a job killed during that
    copy leaves a truncated ``checkpoint_last.pt`` and nothing to resume from. For local
    files, copy to a temporary name in the same folder and ``os.replace`` it (atomic on POSIX),
    so the destination is always the old file or the new one."""

    @functools.wraps(copy_fn)
    def copy(src_path: str, dst_path: str, overwrite: bool = False) -> bool:
        if "://" in src_path or "://" in dst_path:
            return copy_fn(src_path, dst_path, overwrite=overwrite)
        if os.path.exists(dst_path) and not overwrite:
            return False
        tmp = f"{dst_path}.partial-{os.getpid()}"
        try:
            shutil.copyfile(src_path, tmp)
            os.replace(tmp, dst_path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        return True

    copy.fairseq_ext_atomic = True
    return staticmethod(copy)


def install() -> None:
    """Allow-list ``SAFE_CHECKPOINT_GLOBALS`` for torch's weights-only loader, make fairseq's
    checkpoint loader report unsafe or corrupt files clearly, and make its checkpoint copies
    atomic (``_atomic_copy``). Idempotent."""
    from fairseq import checkpoint_utils
    from fairseq.file_io import PathManager

    torch.serialization.add_safe_globals(list(SAFE_CHECKPOINT_GLOBALS))
    if not getattr(checkpoint_utils.load_checkpoint_to_cpu, "fairseq_ext_guarded", False):
        checkpoint_utils.load_checkpoint_to_cpu = _guard_loader(checkpoint_utils.load_checkpoint_to_cpu)
    if not getattr(PathManager.copy, "fairseq_ext_atomic", False):
        PathManager.copy = _atomic_copy(PathManager.copy)


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
    tmp = dst + ".tmp"
    torch.save(out, tmp)
    os.replace(tmp, dst)


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
    args = p.parse_args(argv)
    if args.cmd == "inspect":
        found = pickled_globals(args.checkpoint)
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

"""Safe checkpoint loading: torch's ``weights_only`` unpickler with the globals fairseq's
checkpoints pickle, one line for a file it cannot load, what a file pickles (read without running
it), and a weights-only copy (``python -m fairseq_ext.checkpoints``)."""

from __future__ import annotations

import argparse
import os
import pickletools
import re
import zipfile
from typing import Any, Optional

import numpy as np
import torch
from torch import _weights_only_unpickler

from fairseq_ext.checkpoints.dictionaries import RECORD_KEY, recorded_dictionaries
from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.common.paths import require_readable_file
from fairseq_ext.fairseq_changes.output_files import exclusive_output

try:
    from numpy._core.multiarray import _reconstruct  # numpy >= 2
except ImportError:
    from numpy.core.multiarray import _reconstruct  # numpy 1.x

SAFE_CHECKPOINT_GLOBALS: tuple = (
    argparse.Namespace,
    np.ndarray,
    np.dtype,
    type(np.dtype(np.int64)),
    _reconstruct,
)


class UnsafeCheckpointError(FairseqExtError):
    """The checkpoint pickles a global that is not on the allow-list."""


class CorruptCheckpointError(FairseqExtError):
    """The checkpoint file is truncated or not a torch checkpoint."""


def require_file(path: str, missing_fix: str = "check the --path/--restore-file argument") -> None:
    """``path`` is a readable checkpoint file (``missing_fix``: what to do when it is missing)."""
    fix = (
        f"give a checkpoint file in it, e.g. {os.path.join(path, 'checkpoint_best.pt')}"
        if os.path.isdir(path)
        else missing_fix
    )
    require_readable_file(path, "checkpoint", fix)


def static_pickle_globals(path: str) -> Optional[set[str]]:
    """Globals named by the pickles of a raw pickle or a torch legacy-format file (up to five
    pickles), read with ``pickletools`` (nothing is run); None when the file is neither."""
    found: set[str] = set()
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        for _ in range(5):
            names, strings, ops = set(), [], 0
            try:
                for op, arg, _pos in pickletools.genops(f):
                    ops += 1
                    if op.name == "GLOBAL":
                        names.add(arg.replace(" ", "."))
                    elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
                        names.add(f"{strings[-2]}.{strings[-1]}")
                    elif isinstance(arg, str):
                        strings.append(arg)
            except Exception:  # not (or no longer) a pickle
                return None
            if ops < 2:  # STOP alone pickles nothing
                return None
            found |= names
            if f.tell() == size:
                return found
    return found


def pickled_globals(path: str) -> list[str]:
    """Every global pickled in ``path`` beyond torch's built-in safe set."""
    require_file(path)
    if not zipfile.is_zipfile(path):
        found = static_pickle_globals(path)
        if found is None:
            raise CorruptCheckpointError(
                f"cannot read checkpoint {path}: it is neither a torch checkpoint (a zip archive) "
                "nor a pickle. The file is corrupt or not a checkpoint; use a checkpoint written "
                "by fairseq-train"
            )
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
            f"refusing to load {path}: it pickles {', '.join(names)}, which fairseq_ext does not "
            "allow (a pickled global can run code when loaded). Use a checkpoint written by "
            "fairseq-train, or re-save a trusted one as plain tensors with 'python -m "
            "fairseq_ext.checkpoints export'."
        )
    with open(path, "rb") as f:
        zip_header = f.read(4) == b"PK\x03\x04"
    if zip_header:
        kind = (
            "a torch checkpoint (a zip archive) that is truncated or corrupt (an interrupted copy "
            "or save?)"
        )
    elif static_pickle_globals(path) is not None:
        kind = (
            "a pickle that the weights-only loader cannot read (a raw pickle, or torch's legacy "
            "format), not a checkpoint fairseq-train writes"
        )
    else:
        kind = (
            "neither a torch checkpoint (a zip archive) nor a pickle: corrupt, or not a checkpoint"
        )
    text = str(exc).strip()  # torch's reason, without its advice to load unsafely
    detail = re.search(r"WeightsUnpickler error:\s*(\S[^\n]*)", text)
    first = (text.split(". ")[0].splitlines() or [""])[0].rstrip(".")
    reason = detail.group(1).strip() if detail else first
    return CorruptCheckpointError(
        f"cannot read checkpoint {path}: it is {kind} ({type(exc).__name__}: {reason}). Not "
        "malicious: it pickles no foreign global, and nothing in it was run. Use another "
        "checkpoint, e.g. checkpoint_best.pt or an earlier checkpoint_N_M.pt."
    )


def safe_load(path: str) -> dict[str, Any]:
    """``torch.load(path, weights_only=True)`` on CPU, with the allow-list and clear errors."""
    require_file(path)
    # add_safe_globals, not the safe_globals context manager, which would undo the allow-list row
    torch.serialization.add_safe_globals(list(SAFE_CHECKPOINT_GLOBALS))
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # random bytes fail with any of IndexError, KeyError, RuntimeError...
        raise _explain_failure(path, exc) from None


def export_weights(src: str, dst: str, fp16: bool = False) -> None:
    """Write the weights, config and dictionaries of checkpoint ``src`` (no optimizer state, no
    metrics or training time), loadable by ``fairseq-generate --path`` and ``fairseq-train
    --finetune-from-model``."""
    state = safe_load(src)
    model = {
        k: (v.half() if fp16 and v.is_floating_point() else v) for k, v in state["model"].items()
    }
    cfg = state.get("cfg")
    for section in (cfg.get("model"), cfg.get("task")) if cfg is not None else ():
        for key in ("init_encoder_from", "init_decoder_from"):  # local history
            if isinstance(section, argparse.Namespace) and hasattr(section, key):
                setattr(section, key, None)
            elif isinstance(section, dict) and key in section:
                section[key] = None
    out = {
        "args": state.get("args"),
        "cfg": cfg,
        "model": model,
        "optimizer_history": state.get("optimizer_history", [])[-1:],
        "extra_state": {
            "train_iterator": {"version": 2, "epoch": 1, "iterations_in_epoch": 0, "shuffle": True}
        },
    }
    recorded = recorded_dictionaries(state)
    if recorded:
        out["task_state"] = {RECORD_KEY: recorded}
    with exclusive_output(dst, "wb", option="output path") as f:
        torch.save(out, f)

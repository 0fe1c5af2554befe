"""Safe checkpoint loading: torch's ``weights_only`` unpickler with ``allow_list``, and one line
for a file it cannot load."""

from __future__ import annotations

import re
from typing import Any

import torch

from fairseq_ext.checkpoints.allow_list import (
    SAFE_CHECKPOINT_GLOBALS,
    CorruptCheckpointError,
    UnsafeCheckpointError,
    require_file,
    static_pickle_globals,
    unsafe_globals,
)
from fairseq_ext.common.errors import FairseqExtError


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
    return CorruptCheckpointError(
        f"cannot read checkpoint {path}: it is {_kind_of_unreadable(path)} ({type(exc).__name__}: "
        f"{_reason(exc)}). Not malicious: it pickles no foreign global, and nothing in it was run. "
        "Use another checkpoint, e.g. checkpoint_best.pt or an earlier checkpoint_N_M.pt."
    )


def _kind_of_unreadable(path: str) -> str:
    with open(path, "rb") as f:
        zip_header = f.read(4) == b"PK\x03\x04"
    if zip_header:
        return (
            "a torch checkpoint (a zip archive) that is truncated or corrupt "
            "(an interrupted copy or save?)"
        )
    if static_pickle_globals(path) is not None:
        return (
            "a pickle that the weights-only loader cannot read (a raw pickle, or torch's legacy "
            "format), not a checkpoint fairseq-train writes"
        )
    return "neither a torch checkpoint (a zip archive) nor a pickle: corrupt, or not a checkpoint"


def _reason(exc: BaseException) -> str:
    """torch's reason in a few words, without its advice to turn the weights-only loading off."""
    text = str(exc).strip()
    detail = re.search(r"WeightsUnpickler error:\s*(\S[^\n]*)", text)
    return (
        detail.group(1).strip()
        if detail
        else text.split(". ")[0].splitlines()[0].rstrip(".")
        if text
        else ""
    )


def safe_load(path: str) -> dict[str, Any]:
    """``torch.load(path, weights_only=True)`` on CPU, with the allow-list and clear errors."""
    require_file(path)
    # add_safe_globals, not the safe_globals context manager: the latter removes its entries on
    # exit, which would undo fairseq_changes.install() for every later load in the same process.
    torch.serialization.add_safe_globals(list(SAFE_CHECKPOINT_GLOBALS))
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except (
        Exception
    ) as exc:  # random bytes fail with any of IndexError, KeyError, RuntimeError, ...
        raise _explain_failure(path, exc) from None

"""The globals a fairseq checkpoint of the plugin may pickle (for torch's ``weights_only``
loading), and those a file does pickle."""

from __future__ import annotations

import argparse
import os
import pickletools
import zipfile
from typing import Optional

import numpy as np
import torch
from torch import _weights_only_unpickler

from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.common.paths import require_readable_file


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


def static_pickle_globals(path: str) -> Optional[set[str]]:
    """Globals named by the pickles of a raw pickle or a torch legacy-format file, read with
    ``pickletools`` (nothing is run); None when the file is neither."""
    found: set[str] = set()
    complete = 0
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
                break
            if ops < 2:  # STOP alone pickles nothing
                break
            found |= names
            complete += 1
            if f.tell() == size:
                return found
    return found if complete == 5 else None


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


def require_file(path: str, missing_fix: str = "check the --path/--restore-file argument") -> None:
    """``path`` is a readable checkpoint file (``missing_fix``: what to do when it is missing)."""
    fix = (
        f"give a checkpoint file in it, e.g. {os.path.join(path, 'checkpoint_best.pt')}"
        if os.path.isdir(path)
        else missing_fix
    )
    require_readable_file(path, "checkpoint", fix)

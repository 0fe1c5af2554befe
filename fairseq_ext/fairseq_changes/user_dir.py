"""``--user-dir``: the ``user-dir`` row, and one line for a folder of this repository that holds
no plugin (docs/plugin.md)."""

from __future__ import annotations

import functools
import importlib
import os
from pathlib import Path

from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.fairseq_changes.one_line_errors import install_cli_excepthook

PLUGIN_DIR = Path(__file__).resolve().parent.parent
PACKAGE = __name__.split(".")[0]


def names_this_plugin(user_dir) -> bool:
    """Whether a ``--user-dir`` value is this package's folder (relative to the working
    directory, as fairseq resolves it)."""
    return user_dir is not None and os.path.realpath(user_dir) == os.path.realpath(PLUGIN_DIR)


def loading_this_plugin(import_user_module):
    """fairseq's ``import_user_module``, then, for this package's folder, its ``models`` and
    ``tasks`` imported as on fairseq's first import (which skips a package already imported)."""

    @functools.wraps(import_user_module)
    def loading_import_user_module(args):
        import_user_module(args)
        if names_this_plugin(getattr(args, "user_dir", None)):
            for part in ("models", "tasks"):
                importlib.import_module(f"{PACKAGE}.{part}")

    return loading_import_user_module


def refuse_as_user_dir(folder: str) -> None:
    """Stop the fairseq command whose ``--user-dir`` is ``folder`` with one line; the plugin's
    excepthook is installed first, since nothing of the plugin is loaded yet."""
    install_cli_excepthook()
    raise FairseqExtError(
        f"--user-dir {folder} holds no fairseq plugin: it registers no task, model or criterion "
        f"(so --task would be refused as an invalid choice); the plugin is {PLUGIN_DIR}: give "
        f"--user-dir {PLUGIN_DIR}"
    )

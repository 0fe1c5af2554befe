"""The ``user-dir`` row, applied once ``fairseq.utils`` is imported (``when_imported``: a finder
on ``sys.meta_path`` that finds nothing itself, watches for one module and leaves), and one line
for a folder of this repository that holds no plugin (docs/plugin.md)."""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.util
import os
import sys
from pathlib import Path
from typing import Callable

from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.fairseq_changes.one_line_errors import install_cli_excepthook

PLUGIN_DIR = Path(__file__).resolve().parent.parent
PACKAGE = __name__.split(".")[0]


class _Loader(importlib.abc.Loader):
    """The module's own loader, then the callback; the module keeps its own loader."""

    def __init__(self, loader, callback: Callable[[], None]):
        self.loader, self.callback = loader, callback

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        self.callback()


class _Watch(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, callback: Callable[[], None]):
        self.name, self.callback = name, callback

    def find_spec(self, name, path, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)  # the spec is found by the finders after it, and only once
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, self.callback)
        return spec


def when_imported(name: str, callback: Callable[[], None]) -> None:
    """``callback()`` once module ``name`` is imported (a second call for it adds no watch)."""
    if name in sys.modules:
        callback()
    elif not any(isinstance(f, _Watch) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _Watch(name, callback))


def loading_this_plugin(import_user_module):
    """fairseq's ``import_user_module``, then, for this package's folder (relative to the working
    directory, as fairseq resolves it), its ``models`` and ``tasks`` imported."""

    @functools.wraps(import_user_module)
    def loading_import_user_module(args):
        import_user_module(args)
        folder = getattr(args, "user_dir", None)
        if folder is not None and os.path.realpath(folder) == os.path.realpath(PLUGIN_DIR):
            for part in ("models", "tasks"):
                importlib.import_module(f"{PACKAGE}.{part}")

    return loading_import_user_module


def refuse_as_user_dir(folder: str) -> None:
    """Stop the fairseq command whose ``--user-dir`` is ``folder`` with one line (the excepthook
    first: nothing of the plugin is loaded yet)."""
    install_cli_excepthook()
    raise FairseqExtError(
        f"--user-dir {folder} holds no fairseq plugin: it registers no task, model or criterion "
        f"(so --task would be refused as an invalid choice); the plugin is {PLUGIN_DIR}: give "
        f"--user-dir {PLUGIN_DIR}"
    )

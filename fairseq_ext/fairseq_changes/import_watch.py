"""Run a callback once a module is imported: at once if it is, else when it is (a finder on
``sys.meta_path`` that finds nothing itself, watches for that one module and then leaves)."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Callable


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

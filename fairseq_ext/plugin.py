"""Loading the plugin: ``--user-dir fairseq_ext`` on fairseq's command line, ``load()`` in Python.

fairseq's ``--user-dir`` (``fairseq.utils.import_user_module``) imports the package and its
``tasks`` and ``models`` folders, whose modules register every task, model, architecture and
criterion, but only when ``fairseq_ext`` is not in ``sys.modules`` yet: a process that imported
``fairseq_ext.masking`` or ``fairseq_ext.hub`` first (neither imports fairseq) used to get
nothing registered, and ``--task cmlm_hybrid`` was an invalid choice. So importing the package
calls ``load_on_user_dir()``: ``import_user_module`` gains one step, ``load()`` after fairseq's
own when the folder it is given is this package's. fairseq may be imported before the plugin
or after it, so the step is added at once when ``fairseq.utils`` is imported, else when it is
(a finder on ``sys.meta_path`` that finds nothing itself, watches for that one module and
leaves once it has run). Registration stays where fairseq loads the plugin: importing the
package, or the masks, registers nothing and imports no fairseq (registering on import would
need fairseq at import, or an import of fairseq that registers without being asked); every
other ``--user-dir`` is fairseq's alone. Importing a module of the plugin registers what it
defines exactly once, in any order; ``load()`` only imports.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import os
import sys

WATCHED = "fairseq.utils"  # the module of import_user_module
MARK = "fairseq_ext_loads"  # on the import_user_module that loads the plugin for its folder
FOLDER = os.path.dirname(os.path.abspath(__file__))


def load() -> None:
    """Import ``fairseq_ext.models`` and ``fairseq_ext.tasks``, as ``--user-dir fairseq_ext`` does:
    their modules register every task, model, architecture and criterion of the plugin with
    fairseq, and ``fairseq_ext.tasks`` applies ``fairseq_changes.install()`` (the changes its table
    lists, scoped to the plugin's tasks; ``FAIRSEQ_EXT_PATCHES=off`` makes none). A second call
    changes nothing."""
    import fairseq_ext.models  # noqa: F401
    import fairseq_ext.tasks  # noqa: F401


def names_this_plugin(user_dir) -> bool:
    """Whether a ``--user-dir`` value is this package's folder (as fairseq resolves it: relative
    to the working directory)."""
    return user_dir is not None and os.path.realpath(os.path.abspath(user_dir)) == os.path.realpath(
        FOLDER
    )


def _loading(import_user_module):
    """fairseq's ``import_user_module``, then ``load()`` when its folder is this package's."""
    if getattr(import_user_module, MARK, False):
        return import_user_module

    @functools.wraps(import_user_module)
    def loading_import_user_module(args):
        import_user_module(args)
        if names_this_plugin(getattr(args, "user_dir", None)):
            load()

    setattr(loading_import_user_module, MARK, True)
    return loading_import_user_module


def _add_step(utils) -> None:
    utils.import_user_module = _loading(utils.import_user_module)


class _Loader(importlib.abc.Loader):
    """``fairseq.utils``'s own loader, then ``_add_step``; the module keeps its own loader."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        _add_step(module)


class _Watch(importlib.abc.MetaPathFinder):
    """Finds ``fairseq.utils`` with the other finders and hands it ``_Loader``; then leaves."""

    def find_spec(self, name, path, target=None):
        if name != WATCHED:
            return None
        sys.meta_path.remove(self)  # the spec is found by the finders after it, and only once
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


def load_on_user_dir() -> None:
    """``--user-dir`` naming this package loads the plugin, whether fairseq is imported already
    (the step is added now) or later (when ``fairseq.utils`` is imported). A second call changes
    nothing."""
    if WATCHED in sys.modules:
        _add_step(sys.modules[WATCHED])
    elif not any(isinstance(f, _Watch) for f in sys.meta_path):
        sys.meta_path.insert(0, _Watch())

"""Loading the plugin from Python: the same as fairseq's ``--user-dir fairseq_ext``.

fairseq's command-line tools import ``fairseq_ext.tasks`` and ``fairseq_ext.models`` for
``--user-dir``; Python code that drives fairseq in process (notebooks, tests, the hub API)
calls ``load()`` once before parsing fairseq options or building a task. Importing a module
registers what it defines exactly once, whatever the order; ``load()`` only imports.
"""
from __future__ import annotations


def load() -> None:
    """Import ``fairseq_ext.models`` and ``fairseq_ext.tasks``, as ``--user-dir fairseq_ext`` does:
    their modules register every task, model, architecture and criterion of the plugin with
    fairseq, and ``fairseq_ext.tasks`` applies ``fairseq_patches.install()`` (the changes its table
    lists, scoped to the plugin's tasks; ``FAIRSEQ_EXT_PATCHES=off`` makes none). A second call
    changes nothing."""
    import fairseq_ext.models  # noqa: F401
    import fairseq_ext.tasks  # noqa: F401

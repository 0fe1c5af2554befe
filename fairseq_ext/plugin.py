"""Loading the plugin from Python: ``load()`` registers what ``--user-dir fairseq_ext`` does."""

from __future__ import annotations


def load() -> None:
    """Import ``fairseq_ext.models`` and ``fairseq_ext.tasks``: their modules register every task,
    model, architecture and criterion with fairseq, and ``fairseq_ext.tasks`` applies
    ``fairseq_changes.install()``. A second call changes nothing."""
    import fairseq_ext.models  # noqa: F401
    import fairseq_ext.tasks  # noqa: F401

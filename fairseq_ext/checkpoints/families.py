"""Which tasks may use each other's checkpoints: one function, ``family_of``, over the plugin's
family registry (``fairseq_ext.common.families``).

Tasks that train and decode the same models form a family (the plugin's tasks of a technique
and fairseq's own tasks that share its checkpoints): a checkpoint of one may be used by another
of its family (pre-training -> fine-tuning), never by a task of another family.
"""

from __future__ import annotations

from typing import Optional

from fairseq_ext.common.families import FAMILIES

TASK_FAMILIES = tuple(frozenset(f.tasks + f.fairseq_tasks) for f in FAMILIES)
# fairseq's `translation` cannot decode them
NON_AUTOREGRESSIVE = frozenset(
    t for f in FAMILIES if not f.autoregressive for t in f.tasks + f.fairseq_tasks
)


def family_of(task_name: Optional[str]) -> Optional[frozenset]:
    """The family of ``task_name`` (a frozenset of task names), or None for a task in none."""
    return next((family for family in TASK_FAMILIES if task_name in family), None)

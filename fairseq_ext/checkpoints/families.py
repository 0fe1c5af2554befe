"""Which tasks may use each other's checkpoints: those of one family."""

from __future__ import annotations

from typing import Optional

from fairseq_ext.common.families import FAMILIES

TASK_FAMILIES = tuple(frozenset(f.tasks + f.fairseq_tasks) for f in FAMILIES)
# fairseq's `translation` cannot decode them
NON_AUTOREGRESSIVE = frozenset(
    t for f in FAMILIES if not f.autoregressive for t in f.tasks + f.fairseq_tasks
)


def family_of(task_name: Optional[str]) -> Optional[frozenset]:
    return next((family for family in TASK_FAMILIES if task_name in family), None)

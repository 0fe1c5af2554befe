"""Which tasks may use each other's checkpoints: one function, ``family_of``, over one table.

Tasks that train and decode the same models form a family: a checkpoint of one may be used by
another of its family (pre-training -> fine-tuning), never by a task of another family.
"""
from __future__ import annotations

from typing import Optional

NON_AUTOREGRESSIVE = frozenset({"cmlm_hybrid", "translation_lev"})  # fairseq's `translation` cannot decode them
TASK_FAMILIES = (
    NON_AUTOREGRESSIVE,
    frozenset({"translation_prophetnet", "prophetnet_denoising"}),
    frozenset({"unilm_seq2seq", "permutation_lm"}),
    frozenset({"position_masked_lm", "masked_lm"}),
)


def family_of(task_name: Optional[str]) -> Optional[frozenset]:
    """The family of ``task_name`` (a frozenset of task names), or None for a task in none."""
    return next((family for family in TASK_FAMILIES if task_name in family), None)

"""Refuse binarized data that a model would otherwise skip, clamp or learn as garbage: one
clear message naming the split, side, line and the fix."""
from __future__ import annotations

import numpy as np

from fairseq_ext.errors import FairseqExtError


def refuse_empty_lines(split: str, side: str, sizes: np.ndarray, data: str, min_size: int = 2) -> None:
    """Every line needs a token besides ``</s>``: ``sizes`` (tokens with ``</s>``) >= ``min_size``."""
    bad = np.flatnonzero(np.asarray(sizes) < min_size)
    if len(bad):
        raise FairseqExtError(
            f"{split} {side} line {bad[0] + 1} is empty: it has only </s> ({len(bad)} such line(s) in "
            f"{data}); remove empty lines or pairs before fairseq-preprocess (data_prep/spm.py clean-pair "
            "does this for training data)")


def refuse_long_lines(split: str, side: str, sizes: np.ndarray, limit: int, option: str) -> None:
    """No line longer than ``limit`` tokens (with ``</s>``)."""
    bad = np.flatnonzero(np.asarray(sizes) > limit)
    if len(bad):
        raise FairseqExtError(
            f"{split} {side} line {bad[0] + 1} has {int(sizes[bad[0]])} tokens, more than {option} {limit} "
            f"({len(bad)} such line(s)); raise {option} or split/filter long lines before fairseq-preprocess")

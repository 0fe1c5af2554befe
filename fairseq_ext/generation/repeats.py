"""Removal of consecutive repeated tokens from a non-autoregressive output, the post-processing
of Lee et al. 2018's decoder (``--remove_repeats``) and DA-Transformer's (Huang et al. 2022,
``--decode-dedup``): a parallel decoder may predict one token in two neighbouring slots."""

from __future__ import annotations

import torch


def remove_consecutive_repeats(hypo: dict) -> dict:
    """``hypo`` (a hypothesis as fairseq's generators give it) without each token that equals the
    token before it, and without that token's positional score; ``score`` (the mean by which the
    length beam chose the hypothesis) and ``history`` stay as decoded."""
    tokens = hypo["tokens"]
    keep = torch.ones_like(tokens, dtype=torch.bool)
    keep[1:] = tokens[1:].ne(tokens[:-1])
    if bool(keep.all()):
        return hypo
    return {**hypo, "tokens": tokens[keep], "positional_scores": hypo["positional_scores"][keep]}

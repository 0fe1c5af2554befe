"""Removal of consecutive repeats from a non-autoregressive output (Lee et al. 2018's
``--remove_repeats``; DA-Transformer's ``--decode-dedup`` and, for spans,
``--decode-no-consecutive-repeated-ngram``, Huang et al. 2022)."""

from __future__ import annotations

import torch


def kept_positions(tokens: list, span: int) -> list[int]:
    """The positions of ``tokens`` kept when, left to right, each span of at most ``span`` tokens
    that repeats the span just before it is dropped (the shortest first)."""
    kept: list[int] = []
    for i in range(len(tokens)):
        kept.append(i)
        dropped = True
        while dropped:
            dropped = False
            for n in range(1, min(span, len(kept) // 2) + 1):
                if [tokens[j] for j in kept[-n:]] == [tokens[j] for j in kept[-2 * n : -n]]:
                    del kept[-n:]
                    dropped = True
                    break
    return kept


def remove_consecutive_repeats(hypo: dict, span: int = 1) -> dict:
    """fairseq's hypothesis ``hypo`` without its consecutive repeats of at most ``span`` tokens
    and their positional scores; ``score`` and ``history`` stay as decoded."""
    tokens = hypo["tokens"]
    kept = kept_positions(tokens.tolist(), span)
    if len(kept) == len(tokens):
        return hypo
    index = torch.tensor(kept, dtype=torch.long, device=tokens.device)
    return {**hypo, "tokens": tokens[index], "positional_scores": hypo["positional_scores"][index]}

"""Who may attend to whom in ProphetNet's n-stream self-attention (Qi et al. 2020, section 2.3,
eq. 3-5 and Figure 3).

The decoder runs ``1 + n`` copies of the target positions side by side: the main stream
(block 0, an ordinary causal decoder over the input tokens) and ``n`` predicting streams
(blocks 1..n). Decoder input index ``t`` holds the token *before* target ``t`` (fairseq's
``prev_output_tokens``: ``</s>`` first), so the main-stream state ``h_t`` has read targets
``< t``. Predicting stream ``k`` at index ``t`` predicts target ``t`` from the main-stream
states ``h_0 .. h_{t-k+1}``: stream 1 is the usual next-token prediction, stream 2 predicts
the token after next, and so on (the paper's ``g_{t-1}`` and ``s_{t-1}``, indexed here by the
token they predict rather than by their context, as in ProphetNet's released code). Each
predicting query also attends to its own position, never to other predicting positions, so
parameters can be shared between streams and the streams can be dropped at inference.

Index 0 of the main stream (the ``</s>`` start symbol) stays visible to every predicting
query, also where ``t - k + 1 < 0`` (ProphetNet's release does the same): stream ``k``
predicts the first ``k - 1`` targets from the start symbol alone.
"""
from __future__ import annotations

import torch
from torch import Tensor


def main_stream_mask(length: int, device=None) -> Tensor:
    """Main stream: query ``t`` may attend key ``j`` iff ``j <= t``. Shape ``(T, T)``."""
    idx = torch.arange(length, device=device)
    return idx.unsqueeze(0) <= idx.unsqueeze(1)


def predicting_stream_main_mask(length: int, ngram: int, device=None) -> Tensor:
    """Predicting stream ``k`` (1..n), query ``t`` may attend main key ``j`` iff
    ``j <= max(t - k + 1, 0)``. Shape ``(n, T, T)``; entry ``[k - 1, t, j]``."""
    if ngram < 1:
        raise ValueError(f"ngram must be >= 1, got {ngram}")
    t = torch.arange(length, device=device).view(1, length, 1)
    j = torch.arange(length, device=device).view(1, 1, length)
    k = torch.arange(1, ngram + 1, device=device).view(ngram, 1, 1)
    return j <= (t - k + 1).clamp(min=0)


def ngram_stream_mask(length: int, ngram: int, device=None) -> Tensor:
    """The full n-stream self-attention mask, True = may attend, rows = queries, columns =
    keys, both ordered ``[main 0..T-1, stream 1 0..T-1, ..., stream n 0..T-1]``.

    Rule: main ``t`` sees main ``j <= t``; stream ``k`` at ``t`` sees main
    ``j <= max(t - k + 1, 0)`` and itself (stream ``k`` at ``t``); nothing else.

    Returns:
        ``((1 + ngram) * length, (1 + ngram) * length)`` bool.
    """
    size = (1 + ngram) * length
    mask = torch.zeros(size, size, dtype=torch.bool, device=device)
    mask[:length, :length] = main_stream_mask(length, device=device)
    main_view = predicting_stream_main_mask(length, ngram, device=device)
    eye = torch.eye(length, dtype=torch.bool, device=device)
    for k in range(1, ngram + 1):
        rows = slice(k * length, (k + 1) * length)
        mask[rows, :length] = main_view[k - 1]
        mask[rows, rows] = eye
    return mask


def ngram_stream_key_mask(length: int, ngram: int, device=None) -> Tensor:
    """``ngram_stream_mask`` with the keys each query may see folded into ``T + 1`` columns:
    the main keys ``0..T-1`` and the query's own key (column ``T``).

    Rule: row ``r`` (ordered as in ``ngram_stream_mask``) has ``[r, j] = full[r, j]`` for main
    keys ``j`` and ``[r, T] = full[r, r]`` for its own key if ``r`` is a predicting query (a main
    query sees itself as main key ``t`` already, so its own-key column is False). No query may
    see any other key, so nothing is lost.

    Returns:
        ``((1 + ngram) * length, length + 1)`` bool.
    """
    rows = (1 + ngram) * length
    mask = torch.zeros(rows, length + 1, dtype=torch.bool, device=device)
    mask[:length, :length] = main_stream_mask(length, device=device)
    mask[length:, :length] = predicting_stream_main_mask(length, ngram, device=device).reshape(ngram * length, length)
    mask[length:, length] = True
    return mask

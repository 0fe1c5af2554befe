"""The epsilon of every layer norm (``--layernorm-eps``): BERT's 1e-12, fairseq's 1e-5."""

from __future__ import annotations

from torch import nn


def set_layernorm_eps(model: nn.Module, eps: float) -> int:
    """Set ``eps`` on every layer norm of ``model``; returns how many there are."""
    count = 0
    for module in model.modules():
        if isinstance(module, nn.LayerNorm) or (
            hasattr(module, "normalized_shape") and hasattr(module, "eps")
        ):
            module.eps = eps
            count += 1
    return count

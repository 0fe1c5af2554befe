"""Enhanced dropout gradient (Wagner et al. 2020, section 2.2): attention dropout forward, the
identity backward (``--attention-dropout-straight-through``)."""

from __future__ import annotations

import logging
from typing import Optional

import torch
from fairseq.modules import MultiheadAttention
from fairseq.modules.fairseq_dropout import FairseqDropout
from torch import Tensor, nn

logger = logging.getLogger(__name__)

FLAG = "--attention-dropout-straight-through"


class StraightThroughDropoutFunction(torch.autograd.Function):
    """``y = x * scaled_keep`` forward, ``dx = dy`` backward."""

    @staticmethod
    def forward(ctx, x: Tensor, scaled_keep: Tensor) -> Tensor:
        return x * scaled_keep

    @staticmethod
    def backward(ctx, grad_output: Tensor):
        return grad_output, None


def straight_through_dropout(
    x: Tensor, p: float, training: bool = True, generator: Optional[torch.Generator] = None
) -> Tensor:
    """Dropout with probability ``p`` whose gradient is passed through unmasked and unscaled."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    if not training or p == 0.0:
        return x
    keep = torch.empty_like(x).bernoulli_(1.0 - p, generator=generator)
    return StraightThroughDropoutFunction.apply(x, keep / (1.0 - p))


class StraightThroughDropout(FairseqDropout):
    """fairseq's dropout module with the straight-through backward pass."""

    def forward(self, x: Tensor, inplace: bool = False) -> Tensor:
        if self.p > 0 and (self.training or self.apply_during_inference):
            return straight_through_dropout(x, self.p)
        return x


def use_straight_through_attention_dropout(model: nn.Module) -> int:
    """Give every ``MultiheadAttention`` of ``model`` a ``StraightThroughDropout`` (on fairseq's
    Python attention path, where it is applied); returns how many."""
    switched = 0
    for module in model.modules():
        if isinstance(module, MultiheadAttention):
            old = module.dropout_module
            new = StraightThroughDropout(old.p, module_name=old.module_name)
            new.apply_during_inference = old.apply_during_inference
            module.dropout_module = new
            module.skip_embed_dim_check = True  # fairseq's switch to its Python attention path
            switched += 1
    return switched


def apply_straight_through_from_args(model: nn.Module, args) -> None:
    """Switch ``model`` when its args ask for it (at the end of ``build_model``)."""
    if getattr(args, "attention_dropout_straight_through", False):
        n = use_straight_through_attention_dropout(model)
        logger.info(
            "%s: %d attention modules drop their weights with the straight-through "
            "gradient (attention dropout %s)",
            FLAG,
            n,
            getattr(args, "attention_dropout", "?"),
        )

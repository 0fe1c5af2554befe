"""Enhanced dropout gradient (Wagner et al. 2020, "Positional Masking for Language Models",
section 2.2): "although we dropout the attention weights in the forward, we do not apply
the dropout mask when the gradients are back-propagated".

Forward: ``y = x * m / (1 - p)`` with ``m ~ Bernoulli(1 - p)``, exactly as ordinary
(inverted) dropout. Backward: ``dL/dx = dL/dy``: neither the mask nor the ``1 / (1 - p)``
scale is applied, i.e. the dropout layer counts as the identity in the backward pass
("allowing all gradients to flow through the dropout layer", section 2). We drop the scale
too because ``m / (1 - p)`` as a whole is the mask the forward pass multiplies by: its
expectation is 1, so the identity is the expected value of the ordinary dropout gradient,
whereas keeping ``1 / (1 - p)`` would enlarge every attention gradient by that factor,
a learning-rate change on the attention path that the paper does not describe.

``use_straight_through_attention_dropout(model)`` switches every fairseq
``MultiheadAttention`` of a model (encoder, decoder and cross attention) to it; the
``--attention-dropout-straight-through`` model flag does this at build time.
"""
from __future__ import annotations

import argparse
import logging
from typing import Optional

import torch
from fairseq.modules import MultiheadAttention
from fairseq.modules.fairseq_dropout import FairseqDropout
from torch import Tensor, nn

logger = logging.getLogger(__name__)

FLAG = "--attention-dropout-straight-through"


class StraightThroughDropoutFunction(torch.autograd.Function):
    """``y = x * scaled_keep`` forward; ``dx = dy`` backward (the mask is not applied)."""

    @staticmethod
    def forward(ctx, x: Tensor, scaled_keep: Tensor) -> Tensor:
        return x * scaled_keep

    @staticmethod
    def backward(ctx, grad_output: Tensor):
        return grad_output, None


def straight_through_dropout(x: Tensor, p: float, training: bool = True,
                             generator: Optional[torch.Generator] = None) -> Tensor:
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
    """Make every ``MultiheadAttention`` of ``model`` drop its attention probabilities with
    ``StraightThroughDropout``; returns how many modules were switched.

    fairseq computes attention with ``F.multi_head_attention_forward`` whenever it can, and
    that function applies its own dropout; the switched modules take fairseq's own Python
    path instead (the one it uses for ONNX, TPUs and pruned heads), where the attention
    probabilities go through ``self.dropout_module``; they keep it at inference, where it
    computes the same attention a little more slowly. Custom attention modules that do not
    derive from ``MultiheadAttention`` should call ``straight_through_dropout`` themselves.
    """
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


def add_straight_through_args(parser: argparse.ArgumentParser) -> None:
    """Add ``--attention-dropout-straight-through`` to a model's ``add_args``."""
    parser.add_argument(FLAG, action="store_true",
                        help="drop attention weights in the forward pass but pass their gradient "
                             "through without the dropout mask (enhanced dropout gradient, "
                             "Wagner et al. 2020, section 2.2)")


def apply_straight_through_from_args(model: nn.Module, args) -> None:
    """Switch ``model`` when its args ask for it (call at the end of ``build_model``)."""
    if getattr(args, "attention_dropout_straight_through", False):
        n = use_straight_through_attention_dropout(model)
        logger.info("%s: %d attention modules drop their weights with the straight-through "
                    "gradient (attention dropout %s)", FLAG, n, getattr(args, "attention_dropout", "?"))

"""``--layernorm-eps``: the epsilon of every layer norm of a model.

PyTorch and fairseq use 1e-5; BERT and its descendants (MiniLM, ...) use 1e-12 (Devlin et al.
2019's release, ``layer_norm_eps`` in transformers' configs). A converted BERT checkpoint
computes BERT's function exactly only with BERT's epsilon, so the encoder models take it as
an option (``python -m fairseq_ext.convert`` prints the value to pass).
"""
from __future__ import annotations

from torch import nn

DEFAULT_LAYERNORM_EPS = 1e-5


def add_layernorm_eps_arg(parser) -> None:
    parser.add_argument("--layernorm-eps", type=float, metavar="EPS",
                        help=f"epsilon of every layer norm (default {DEFAULT_LAYERNORM_EPS:g}; BERT "
                             "checkpoints use 1e-12)")


def set_layernorm_eps(model: nn.Module, eps: float) -> int:
    """Set ``eps`` on every layer norm of ``model``; returns how many there are."""
    if not eps > 0:
        from fairseq_ext.errors import FairseqExtError

        raise FairseqExtError(f"--layernorm-eps must be > 0, got {eps}")
    count = 0
    for module in model.modules():
        if isinstance(module, nn.LayerNorm) or (hasattr(module, "normalized_shape") and hasattr(module, "eps")):
            module.eps = eps
            count += 1
    return count

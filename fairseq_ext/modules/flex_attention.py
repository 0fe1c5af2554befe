"""``--attention-backend flex``: the ``masking.predicates`` rules as FlexAttention
``BlockMask``s (Dong et al. 2024) in full passes; cached decoding stays dense."""

from __future__ import annotations

import functools
from typing import Optional

import torch
from torch import Tensor

from fairseq_ext.common.errors import require
from fairseq_ext.masking import predicates
from fairseq_ext.masking.predicates import MaskMod

try:
    from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention
except ImportError:  # torch < 2.5: only the dense backend
    BlockMask = create_block_mask = flex_attention = None

ATTENTION_BACKENDS = ("dense", "flex")


def check_attention_backend(backend: str) -> None:
    """Refuse an unknown backend, or flex without torch >= 2.5."""
    require(
        backend in ATTENTION_BACKENDS,
        f"--attention-backend {backend!r} is unknown; choose one of "
        f"{', '.join(ATTENTION_BACKENDS)}",
    )
    require(
        backend != "flex" or flex_attention is not None,
        "--attention-backend flex needs torch >= 2.5 (torch.nn.attention.flex_attention); "
        f"this is torch {torch.__version__}: upgrade torch or use --attention-backend dense",
    )


def is_block_mask(mask) -> bool:
    return BlockMask is not None and isinstance(mask, BlockMask)


def padded_block_mask(rule: MaskMod, padding: Tensor) -> BlockMask:
    """``rule`` joined with padding as a ``(B, T, T)`` ``BlockMask``."""
    B, T = padding.shape
    allowed = predicates.and_masks(rule, predicates.padding(padding))
    return create_block_mask(allowed, B, None, T, T, device=padding.device)


@functools.lru_cache(maxsize=None)
def _compiled_flex_attention():
    return torch.compile(flex_attention)


def flex_attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    block_mask: BlockMask,
    *,
    training: bool,
    dropout: float,
    score_mod=None,
    scale: Optional[float] = None,
) -> Tensor:
    """``flex_attention`` (compiled on CUDA); refuses what it lacks: dropout, a CPU backward."""
    require(
        not (training and dropout > 0),
        "--attention-backend flex has no attention dropout (torch's flex_attention has none), "
        f"and this model trains with --attention-dropout {dropout}: train with "
        "--attention-dropout 0, or use --attention-backend dense",
    )
    require(
        q.device.type != "cpu"
        or not (torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))),
        "--attention-backend flex cannot compute gradients on CPU (torch's flex_attention has "
        "no CPU backward): train on CUDA, or use --attention-backend dense (on CPU flex serves "
        "passes without gradients only)",
    )
    attend = _compiled_flex_attention() if q.device.type == "cuda" else flex_attention
    return attend(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale)


class NgramStreamBlockMask:
    """ProphetNet's n-stream rule as a ``BlockMask`` for the query rows ``first_row ..``;
    sliced as ``mask[first:]`` like the dense key mask."""

    def __init__(self, length: int, ngram: int, device, first_row: int = 0):
        self.length, self.ngram, self.device, self.first_row = length, ngram, device, first_row
        rows = (1 + ngram) * length
        rule = predicates.ngram_stream(length)

        def rows_from_first(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            return rule(b, h, q_idx + first_row, kv_idx)

        self.block_mask = create_block_mask(
            rows_from_first, None, None, rows - first_row, rows, device=device
        )

    def __getitem__(self, rows: slice) -> "NgramStreamBlockMask":
        return NgramStreamBlockMask(
            self.length, self.ngram, self.device, self.first_row + (rows.start or 0)
        )

    def attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        bias: Tensor,
        buckets: Tensor,
        *,
        training: bool,
        dropout: float,
    ) -> Tensor:
        """Attention under the rule plus the relative-position bias, as the dense path has it."""
        T = self.length
        table = (buckets if buckets.dim() == 3 else buckets.unsqueeze(0)).expand(q.size(0), -1, -1)
        bias = bias.to(q.dtype)

        def relative_position_bias(
            score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor
        ) -> Tensor:
            bucket = torch.where(kv_idx < T, table[b, q_idx, kv_idx.clamp(max=T - 1)], 0)
            return score + bias[b, h, q_idx, bucket]

        return flex_attend(
            q,
            k,
            v,
            self.block_mask,
            training=training,
            dropout=dropout,
            score_mod=relative_position_bias,
            scale=1.0,
        )

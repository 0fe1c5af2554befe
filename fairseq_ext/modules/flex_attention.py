"""``--attention-backend flex``: the plugin's masked self-attention through FlexAttention (Dong et
al. 2024), the same ``masking.predicates`` rule as a ``BlockMask`` instead of a dense mask, for
UniLM's variants (Su 2019) and ProphetNet's n-stream rule with its bucket bias as a ``score_mod``
(Qi et al. 2020, section 2.3); full passes only, cached decoding stays dense."""

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
    """One clear error for an unknown backend, or for flex where this torch has none."""
    require(
        backend in ATTENTION_BACKENDS,
        f"--attention-backend {backend!r} is unknown; choose one of {', '.join(ATTENTION_BACKENDS)}",
    )
    require(
        backend != "flex" or flex_attention is not None,
        f"--attention-backend flex needs torch >= 2.5 (torch.nn.attention.flex_attention); this is torch "
        f"{torch.__version__}: upgrade torch or use --attention-backend dense",
    )


def is_block_mask(mask) -> bool:
    """Whether ``mask`` is a FlexAttention ``BlockMask`` (the flex backend) rather than a dense
    mask tensor."""
    return BlockMask is not None and isinstance(mask, BlockMask)


def padded_block_mask(rule: MaskMod, padding: Tensor) -> BlockMask:
    """``rule`` joined with ``predicates.padding(padding)`` as a ``BlockMask`` over ``(B, T)``
    queries and keys, broadcast over the heads: the rule ``masking.padded_dense_mask`` evaluates
    densely."""
    B, T = padding.shape
    allowed = predicates.and_masks(rule, predicates.padding(padding))
    return create_block_mask(allowed, B, None, T, T, device=padding.device)


@functools.lru_cache(maxsize=None)
def _compiled_flex_attention():
    """``flex_attention`` compiled once per process (the fused kernels; shapes that change
    between batches make torch compile it for dynamic shapes)."""
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
    """``flex_attention`` of ``(B, H, Q, d)`` queries on ``(B, H, KV, d)`` keys and values
    under ``block_mask`` (and ``score_mod``): ``(B, H, Q, d)``, compiled on CUDA, eager
    elsewhere.

    Refused, in one line each: attention dropout in training (FlexAttention has none) and a
    backward on CPU (torch has none there)."""
    require(
        not (training and dropout > 0),
        f"--attention-backend flex has no attention dropout (torch's flex_attention has none), and this "
        f"model trains with --attention-dropout {dropout}: train with --attention-dropout 0, or use "
        "--attention-backend dense",
    )
    require(
        q.device.type != "cpu"
        or not (torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))),
        "--attention-backend flex cannot compute gradients on CPU (torch's flex_attention has no CPU "
        "backward): train on CUDA, or use --attention-backend dense (on CPU flex serves passes without "
        "gradients only)",
    )
    attend = _compiled_flex_attention() if q.device.type == "cuda" else flex_attention
    return attend(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale)


class NgramStreamBlockMask:
    """ProphetNet's n-stream rule (``predicates.ngram_stream``) as a ``BlockMask`` for the query
    rows ``first_row ..`` of the ``[main; stream 1; ...; stream n]`` layout against all
    ``(1 + n) T`` rows as keys, the same for every example and head.

    It stands where the dense path passes its folded key mask (``NgramStreamTables.key_mask``)
    and slices like it: ``mask[first:]`` is the mask of the rows from ``first`` on (the decoder's
    last layer computes the predicting rows only). ``attend`` runs the attention with the
    relative-position bias."""

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
        require(
            rows.stop is None and rows.step is None,
            f"an n-stream block mask slices as [first:], got {rows}",
        )
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
        """Attention of the query rows on every row under the rule, plus the relative-position
        bias, as ``NgramSelfAttention``'s dense path computes it.

        Args:
            q: ``(B, H, R', d)`` queries of rows ``first_row ..``, already scaled.
            k, v: ``(B, H, (1 + n) T, d)`` keys and values of every row.
            bias: ``(B, H, R', num_buckets)`` bias logits of each query row.
            buckets: ``(R', T)`` or ``(B, R', T)`` bucket of each main key for each query row; a
                predicting row's own key takes bucket 0.

        Returns:
            ``(B, H, R', d)``.
        """
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

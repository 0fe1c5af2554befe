"""A post-norm Transformer layer (Vaswani et al. 2017) whose self-attention takes a per-example
mask and a key/value cache, with fairseq's ``TransformerEncoderLayer`` parameter names so that
BERT/RoBERTa weights load unchanged."""

from __future__ import annotations

from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F
from fairseq import utils
from torch import Tensor, nn

from fairseq_ext.masking import additive_attention_mask
from fairseq_ext.modules.flex_attention import BlockMask, flex_attend, is_block_mask

KeyValue = Tuple[Tensor, Tensor]


class MaskedSelfAttention(nn.Module):
    """Multi-head self-attention with a per-example mask and optional cached keys/values."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0):
        super().__init__()
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.dropout = dropout
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def _heads(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(
        self, x: Tensor, allowed: Union[Tensor, BlockMask], past: Optional[KeyValue] = None
    ) -> Tuple[Tensor, KeyValue]:
        """``x`` ``(B, T, C)``; ``allowed`` ``(B, T, S)`` bool over the past and new keys, or a
        ``BlockMask`` in a full pass; returns the output and all keys/values."""
        q, k, v = (self._heads(proj(x)) for proj in (self.q_proj, self.k_proj, self.v_proj))
        if past is not None:
            k = torch.cat([past[0], k], dim=2)
            v = torch.cat([past[1], v], dim=2)
        if is_block_mask(allowed):
            out = flex_attend(q, k, v, allowed, training=self.training, dropout=self.dropout)
        else:
            # a bool (B, T, S) or (T, S) mask as SDPA's additive (B, 1, T, S) one
            mask = additive_attention_mask(
                allowed if allowed.dim() == 3 else allowed[None], q.dtype
            )
            p = self.dropout if self.training else 0.0
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None], dropout_p=p)
        out = out.transpose(1, 2).reshape(x.size(0), x.size(1), self.embed_dim)
        return self.out_proj(out), (k, v)


class MaskedTransformerLayer(nn.Module):
    """A post-norm Transformer layer (BERT/RoBERTa) on ``MaskedSelfAttention``."""

    def __init__(
        self,
        embed_dim: int,
        ffn_dim: int,
        num_heads: int,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        activation_dropout: float = 0.0,
        activation_fn: str = "gelu",
    ):
        super().__init__()
        self.self_attn = MaskedSelfAttention(embed_dim, num_heads, attention_dropout)
        self.self_attn_layer_norm = nn.LayerNorm(embed_dim)
        self.fc1 = nn.Linear(embed_dim, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, embed_dim)
        self.final_layer_norm = nn.LayerNorm(embed_dim)
        self.activation_fn = utils.get_activation_fn(activation_fn)
        self.dropout, self.activation_dropout = dropout, activation_dropout

    def forward(
        self, x: Tensor, allowed: Union[Tensor, BlockMask], past: Optional[KeyValue] = None
    ) -> Tuple[Tensor, KeyValue]:
        h, kv = self.self_attn(x, allowed, past)
        x = self.self_attn_layer_norm(x + F.dropout(h, self.dropout, self.training))
        h = F.dropout(self.activation_fn(self.fc1(x)), self.activation_dropout, self.training)
        x = self.final_layer_norm(x + F.dropout(self.fc2(h), self.dropout, self.training))
        return x, kv

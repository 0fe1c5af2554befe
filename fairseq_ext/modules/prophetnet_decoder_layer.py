"""One ProphetNet decoder layer (Qi et al. 2020, section 2): n-stream self-attention, encoder
attention and feed-forward, post-norm, every parameter shared by the streams."""

from __future__ import annotations

from typing import Optional

from fairseq import utils
from fairseq.modules import LayerNorm, MultiheadAttention
from fairseq.modules.fairseq_dropout import FairseqDropout
from torch import Tensor, nn

from fairseq_ext.modules.ngram_self_attention import IncrementalState, NgramSelfAttention


class ProphetNetDecoderLayer(nn.Module):
    def __init__(
        self,
        embed_dim: int,
        ffn_dim: int,
        num_heads: int,
        ngram: int,
        num_buckets: int,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        activation_dropout: float = 0.1,
        activation_fn: str = "gelu",
    ):
        super().__init__()
        self.self_attn = NgramSelfAttention(
            embed_dim, num_heads, ngram, num_buckets, attention_dropout
        )
        self.self_attn_layer_norm = LayerNorm(embed_dim)
        self.encoder_attn = MultiheadAttention(
            embed_dim, num_heads, dropout=attention_dropout, encoder_decoder_attention=True
        )
        self.encoder_attn_layer_norm = LayerNorm(embed_dim)
        self.fc1 = nn.Linear(embed_dim, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, embed_dim)
        self.activation_fn = utils.get_activation_fn(activation_fn)
        self.final_layer_norm = LayerNorm(embed_dim)
        self.dropout_module = FairseqDropout(dropout, module_name=self.__class__.__name__)
        self.activation_dropout_module = FairseqDropout(
            activation_dropout, module_name=self.__class__.__name__
        )

    def forward(
        self,
        x: Tensor,
        encoder_out: Optional[Tensor],
        encoder_padding_mask: Optional[Tensor],
        buckets: Tensor,
        key_mask: Tensor,
        incremental_state: Optional[IncrementalState] = None,
        predicting_only: bool = False,
    ) -> Tensor:
        """``x`` ``(R, B, C)`` (see ``NgramSelfAttention.forward``)."""
        residual = x
        if predicting_only:
            residual = x[
                self.self_attn.first_predicting(x.size(0), incremental_state is not None) :
            ]
        x = self.self_attn(x, buckets, key_mask, incremental_state, predicting_only)
        x = self.self_attn_layer_norm(residual + self.dropout_module(x))
        if encoder_out is not None:
            residual = x
            x, _ = self.encoder_attn(
                query=x,
                key=encoder_out,
                value=encoder_out,
                key_padding_mask=encoder_padding_mask,
                incremental_state=incremental_state,
                static_kv=True,
                need_weights=False,
            )
            x = self.encoder_attn_layer_norm(residual + self.dropout_module(x))
        residual = x
        x = self.fc2(self.activation_dropout_module(self.activation_fn(self.fc1(x))))
        return self.final_layer_norm(residual + self.dropout_module(x))

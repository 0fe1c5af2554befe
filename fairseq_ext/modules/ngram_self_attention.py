"""ProphetNet's n-stream self-attention (Qi et al. 2020, section 2.3, eq. 3-5): shared
projections, each query on the main keys and its own key, plus a T5 relative-position bias; and
the decoder layer around it (section 2)."""

from __future__ import annotations

from typing import Dict, Optional, Union

import torch
import torch.nn.functional as F
from fairseq import utils
from fairseq.incremental_decoding_utils import with_incremental_state
from fairseq.modules import LayerNorm, MultiheadAttention
from fairseq.modules.fairseq_dropout import FairseqDropout
from torch import Tensor, nn

from fairseq_ext.modules.flex_attention import NgramStreamBlockMask

IncrementalState = Dict[str, Dict[str, Optional[Tensor]]]


def _gather_bias(bias: Tensor, buckets: Tensor) -> Tensor:
    """``out[..., r, s] = bias[..., r, buckets[r, s]]``."""
    b, h, r, _ = bias.shape
    if buckets.dim() == 2:
        buckets = buckets.unsqueeze(0)
    return bias.gather(-1, buckets.unsqueeze(1).expand(b, h, r, buckets.size(-1)))


@with_incremental_state
class NgramSelfAttention(nn.Module):
    """Multi-head self-attention over a main stream and ``ngram`` predicting streams."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        ngram: int,
        num_buckets: int,
        attention_dropout: float = 0.0,
    ):
        super().__init__()
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim**-0.5
        self.ngram = ngram
        self.num_buckets = num_buckets
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.relative_pos_proj = nn.Linear(embed_dim, num_buckets * num_heads)
        self.dropout_module = FairseqDropout(attention_dropout, module_name=self.__class__.__name__)

    def first_predicting(self, rows: int, incremental: bool) -> int:
        """``T`` in a full pass, 1 incrementally (rows ``[main, stream 1]``)."""
        return 1 if incremental else rows // (1 + self.ngram)

    def _heads(self, x: Tensor) -> Tensor:
        rows, bsz, _ = x.shape
        return x.view(rows, bsz, self.num_heads, self.head_dim).permute(1, 2, 0, 3)

    def forward(
        self,
        x: Tensor,
        buckets: Tensor,
        key_mask: Union[Tensor, NgramStreamBlockMask],
        incremental_state: Optional[IncrementalState] = None,
        predicting_only: bool = False,
    ) -> Tensor:
        """``x`` ``(R, B, C)``, rows ``[main, stream 1, ..., stream n]`` (incrementally
        ``[main, stream 1]``); ``predicting_only``: return the predicting rows only."""
        rows, bsz, _ = x.shape
        first = self.first_predicting(rows, incremental_state is not None)
        k = self._heads(self.k_proj(x))
        v = self._heads(self.v_proj(x))
        queries = x[first:] if predicting_only else x
        q = self._heads(self.q_proj(queries) * self.scaling)
        bias = self.relative_pos_proj(queries).view(
            queries.size(0), bsz, self.num_buckets, self.num_heads
        )
        bias = bias.permute(1, 3, 0, 2).float()  # (B, H, R', num_buckets)
        if isinstance(key_mask, NgramStreamBlockMask):
            out = key_mask.attend(
                q, k, v, bias, buckets, training=self.training, dropout=self.dropout_module.p
            )
            return self._output(out, bsz)
        k_own, v_own = (k[:, :, first:], v[:, :, first:]) if predicting_only else (k, v)
        if incremental_state is not None:
            k_main, v_main = self._cached_main(k[:, :, :1], v[:, :, :1], incremental_state)
        else:
            k_main, v_main = k[:, :, :first], v[:, :, :first]

        on_main = torch.matmul(q, k_main.transpose(-1, -2)).float() + _gather_bias(bias, buckets)
        on_own = (q * k_own).sum(-1, keepdim=True).float() + bias[..., :1]
        scores = torch.cat([on_main, on_own], dim=-1) + key_mask
        probs = self.dropout_module(F.softmax(scores, dim=-1).to(x.dtype))
        keys = k_main.size(2)
        return self._output(
            torch.matmul(probs[..., :keys], v_main) + probs[..., keys:] * v_own, bsz
        )

    def _output(self, out: Tensor, bsz: int) -> Tensor:
        return self.out_proj(out.permute(2, 0, 1, 3).reshape(out.size(2), bsz, self.embed_dim))

    def _cached_main(
        self, k_new: Tensor, v_new: Tensor, incremental_state: IncrementalState
    ) -> tuple:
        """Append the newest main-stream key/value to the cache; return all of them."""
        cache = self.get_incremental_state(incremental_state, "main_stream") or {}
        if cache.get("prev_key") is not None:
            k_new = torch.cat([cache["prev_key"], k_new], dim=2)
            v_new = torch.cat([cache["prev_value"], v_new], dim=2)
        self.set_incremental_state(
            incremental_state, "main_stream", {"prev_key": k_new, "prev_value": v_new}
        )
        return k_new, v_new

    def reorder_incremental_state(
        self, incremental_state: IncrementalState, new_order: Tensor
    ) -> None:
        """Follow beam search's reordering of the hypotheses."""
        cache = self.get_incremental_state(incremental_state, "main_stream")
        if cache is not None:
            for key in ("prev_key", "prev_value"):
                if cache.get(key) is not None:
                    cache[key] = cache[key].index_select(0, new_order)
            self.set_incremental_state(incremental_state, "main_stream", cache)


class ProphetNetDecoderLayer(nn.Module):
    """N-stream self-attention, encoder attention and feed-forward, post-norm, every parameter
    shared by the streams; sizes and dropout from the model's ``args``."""

    def __init__(self, args, embed_dim: int):
        super().__init__()
        heads, attention_dropout = args.decoder_attention_heads, args.attention_dropout
        self.self_attn = NgramSelfAttention(
            embed_dim, heads, args.ngram, args.num_buckets, attention_dropout
        )
        self.self_attn_layer_norm = LayerNorm(embed_dim)
        self.encoder_attn = MultiheadAttention(
            embed_dim, heads, dropout=attention_dropout, encoder_decoder_attention=True
        )
        self.encoder_attn_layer_norm = LayerNorm(embed_dim)
        self.fc1 = nn.Linear(embed_dim, args.decoder_ffn_embed_dim)
        self.fc2 = nn.Linear(args.decoder_ffn_embed_dim, embed_dim)
        self.activation_fn = utils.get_activation_fn(args.activation_fn)
        self.final_layer_norm = LayerNorm(embed_dim)
        name = self.__class__.__name__
        self.dropout_module = FairseqDropout(args.dropout, module_name=name)
        self.activation_dropout_module = FairseqDropout(args.activation_dropout, module_name=name)

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
            incremental = incremental_state is not None
            residual = x[self.self_attn.first_predicting(x.size(0), incremental) :]
        x = self.self_attn(x, buckets, key_mask, incremental_state, predicting_only)
        x = self.self_attn_layer_norm(residual + self.dropout_module(x))
        if encoder_out is not None:
            residual = x
            x, _ = self.encoder_attn(
                x,
                encoder_out,
                encoder_out,
                encoder_padding_mask,
                incremental_state,
                need_weights=False,
                static_kv=True,
            )
            x = self.encoder_attn_layer_norm(residual + self.dropout_module(x))
        residual = x
        x = self.fc2(self.activation_dropout_module(self.activation_fn(self.fc1(x))))
        return self.final_layer_norm(residual + self.dropout_module(x))

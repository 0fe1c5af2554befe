"""The one stack of ``unilm_transformer``: BERT's embeddings, post-norm layers and LM head under
the chosen variant's rule (``masking.ATTENTION_VARIANTS``), for a seq2seq pass over
``<s> source </s> target`` (Dong et al. 2019) or a language model in a factorisation order
(Yang et al. 2019); as fairseq's incremental decoder, one target token per step against the cached
keys/values under one row of the variant's rule (``masking.step_mask``)."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple, Union

import torch
from fairseq import utils
from fairseq.models import FairseqEncoder, FairseqIncrementalDecoder
from fairseq.models.roberta.model import RobertaLMHead
from fairseq.modules.transformer_sentence_encoder import init_bert_params
from torch import Tensor, nn

from fairseq_ext.common.config_fields import option_value
from fairseq_ext.common.errors import FairseqExtError, require
from fairseq_ext.masking import (
    ATTENTION_VARIANTS,
    check_order,
    padded_dense_mask,
    predicates,
    step_mask,
)
from fairseq_ext.modules import MaskedTransformerLayer
from fairseq_ext.modules.flex_attention import BlockMask, padded_block_mask
from fairseq_ext.modules.masked_attention import KeyValue


class UniLMStack(FairseqEncoder):
    """Every weight of the model; as fairseq's encoder, the source pass decoding caches."""

    def __init__(self, args, dictionary):
        super().__init__(dictionary)
        self.attention_mask = option_value(args, "attention_mask")
        self.variant = ATTENTION_VARIANTS[self.attention_mask]
        self.attention_backend = option_value(args, "attention_backend")
        self.padding_idx = dictionary.pad()
        self.bos, self.eos = dictionary.bos(), dictionary.eos()
        self.num_positions = args.max_positions
        C = args.encoder_embed_dim
        table = args.max_positions + self.padding_idx + 1
        self.embed_tokens = nn.Embedding(len(dictionary), C, self.padding_idx)
        self.embed_positions = nn.Embedding(table, C, self.padding_idx)
        self.embed_segments = nn.Embedding(2, C)
        self.embed_next_positions = nn.Embedding(table, C, self.padding_idx)
        self.layernorm_embedding = nn.LayerNorm(C)
        self.dropout = args.dropout
        self.layers = nn.ModuleList(
            MaskedTransformerLayer(
                C,
                args.encoder_ffn_embed_dim,
                args.encoder_attention_heads,
                args.dropout,
                args.attention_dropout,
                args.activation_dropout,
                option_value(args, "activation_fn"),
            )
            for _ in range(args.encoder_layers)
        )
        self.lm_head = RobertaLMHead(
            C, len(dictionary), option_value(args, "activation_fn"), weight=self.embed_tokens.weight
        )
        self.apply(init_bert_params)

    def max_positions(self) -> int:
        return self.num_positions

    # --- the core pass ----------------------------------------------------------------------

    def _position_index(self, positions: Tensor, padding: Tensor) -> Tensor:
        too_far = (positions >= self.num_positions) & ~padding
        if too_far.any():
            raise FairseqExtError(
                f"a sequence needs position {int(positions[too_far].max())} but the model has "
                f"--max-positions {self.num_positions}; shorten or filter the input, or use a "
                "model with more positions"
            )
        return (positions + self.padding_idx + 1).masked_fill(padding, self.padding_idx)

    def hidden_states(
        self,
        tokens: Tensor,
        positions: Tensor,
        segments: Tensor,
        allowed: Union[Tensor, BlockMask],
        next_positions: Optional[Tensor] = None,
        past: Optional[List[KeyValue]] = None,
    ) -> Tuple[Tensor, List[KeyValue]]:
        """Final ``(B, T, C)`` states and per layer the keys/values; ``allowed`` as in
        ``MaskedSelfAttention.forward``; ``next_positions``: the position a row predicts (LM only,
        -1 where none)."""
        padding = tokens.eq(self.padding_idx)
        x = self.embed_tokens(tokens) + self.embed_positions(
            self._position_index(positions, padding)
        )
        x = x + self.embed_segments(segments)
        if next_positions is not None:
            none = padding | next_positions.lt(0)
            x = x + self.embed_next_positions(
                self._position_index(next_positions.clamp(min=0), none)
            )
        x = nn.functional.dropout(self.layernorm_embedding(x), self.dropout, self.training)
        keys_values = []
        for i, layer in enumerate(self.layers):
            x, kv = layer(x, allowed, past[i] if past is not None else None)
            keys_values.append(kv)
        return x, keys_values

    # --- seq2seq ------------------------------------------------------------------------------

    def with_cls(self, src_tokens: Tensor) -> Tensor:
        """``src </s>`` -> ``<s> src </s>``, left-padded: every ``</s>`` in the last column."""
        pad = self.padding_idx
        if src_tokens[:, -1].eq(pad).any():
            src_tokens = utils.convert_padding_direction(src_tokens, pad, right_to_left=True)
        lengths = src_tokens.ne(pad).sum(1)
        out = torch.cat([src_tokens.new_full((src_tokens.size(0), 1), pad), src_tokens], dim=1)
        return out.scatter(1, (out.size(1) - 1 - lengths).unsqueeze(1), self.bos)

    def attention_rule(self, segments: Tensor) -> predicates.MaskMod:
        ranks = torch.arange(segments.size(1), device=segments.device).expand_as(segments)
        return self.variant.rule(segments, ranks)

    def _full_mask(self, padding: Tensor, segments: Tensor) -> Union[Tensor, BlockMask]:
        if self.attention_backend == "flex":
            return padded_block_mask(self.attention_rule(segments), padding)
        return padded_dense_mask(self.attention_rule(segments), padding)

    def seq2seq_logits(self, src_tokens: Tensor, prev_output_tokens: Tensor) -> Tensor:
        """Logits of the target tokens ``(B, T, V)``, aligned with fairseq's ``target``."""
        src = self.with_cls(src_tokens)
        tgt_in = prev_output_tokens[:, 1:]
        tokens = torch.cat([src, tgt_in], dim=1)
        padding = tokens.eq(self.padding_idx)
        positions = (~padding).long().cumsum(1) - 1
        segments = torch.cat([torch.zeros_like(src), torch.ones_like(tgt_in)], dim=1)
        x, _ = self.hidden_states(tokens, positions, segments, self._full_mask(padding, segments))
        return self.lm_head(x[:, src.size(1) - 1 :])

    def forward(
        self, src_tokens: Tensor, src_lengths: Optional[Tensor] = None, **unused
    ) -> Dict[str, List[Tensor]]:
        """The source pass: per layer the keys/values of ``<s> src </s>``, and its last state."""
        src = self.with_cls(src_tokens)
        padding = src.eq(self.padding_idx)
        positions = (~padding).long().cumsum(1) - 1
        segments = torch.zeros_like(src)
        x, kvs = self.hidden_states(src, positions, segments, self._full_mask(padding, segments))
        return {
            "src_tokens": [src_tokens],
            "source_padding": [padding],
            "sep_state": [x[:, -1:]],
            "keys": [k for k, _ in kvs],
            "values": [v for _, v in kvs],
        }

    def reorder_encoder_out(self, encoder_out: Dict[str, List[Tensor]], new_order: Tensor):
        return {
            name: [t.index_select(0, new_order) for t in tensors]
            for name, tensors in encoder_out.items()
        }

    # --- permutation / causal language model --------------------------------------------------

    def lm_logits(self, tokens: Tensor, order: Optional[Tensor] = None) -> Tensor:
        """A language model in the order ``order`` (natural if None): the input shuffled into
        the order with its position ids, the causal rule, each row given the embedding of the
        position it predicts (docs/unilm.md). ``(B, n + 1, V)`` in natural order."""
        B, L = tokens.shape
        if order is None:
            order = torch.arange(L, device=tokens.device).expand(B, L)
        else:
            try:
                check_order(order)
            except ValueError as exc:
                raise FairseqExtError(f"factorisation order: {exc}") from None
            require(
                bool(order[:, 0].eq(0).all()),
                "a factorisation order must start with position 0 (<s>)",
            )
        inputs, predicted = order[:, :-1], order[:, 1:]
        shuffled = tokens.gather(1, inputs)
        padding = shuffled.eq(self.padding_idx)
        next_positions = predicted.masked_fill(tokens.gather(1, predicted).eq(self.padding_idx), -1)
        segments = torch.zeros_like(shuffled)
        x, _ = self.hidden_states(
            shuffled,
            inputs,
            segments,
            self._full_mask(padding, segments),
            next_positions=next_positions,
        )
        natural = torch.empty_like(x).scatter_(1, (predicted - 1).unsqueeze(-1).expand_as(x), x)
        return self.lm_head(natural)


class UniLMDecoder(FairseqIncrementalDecoder):
    """The stack as fairseq's decoder (it owns no weights)."""

    def __init__(self, dictionary, stack: UniLMStack):
        super().__init__(dictionary)
        object.__setattr__(self, "stack", stack)  # shared, not a second copy of the weights

    def max_positions(self) -> int:
        return self.stack.max_positions()

    def forward(
        self,
        prev_output_tokens: Tensor,
        encoder_out: Optional[Dict[str, List[Tensor]]] = None,
        incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None,
        **unused,
    ):
        if encoder_out is None:
            raise FairseqExtError("unilm_transformer's decoder needs the source (encoder_out)")
        if incremental_state is None or not self.stack.variant.incremental:
            logits = self.stack.seq2seq_logits(encoder_out["src_tokens"][0], prev_output_tokens)
        else:
            logits = self._step(prev_output_tokens, encoder_out, incremental_state)
        return logits, {"attn": None}

    def _step(
        self,
        prev_output_tokens: Tensor,
        encoder_out: Dict[str, List[Tensor]],
        incremental_state: Dict[str, Dict[str, Optional[Tensor]]],
    ) -> Tensor:
        stack = self.stack
        step = prev_output_tokens.size(1) - 1
        if step == 0:  # the source's </s> predicts the first target token
            if "keys" not in encoder_out:
                raise FairseqExtError(
                    "this encoder_out was already used by an incremental decoding run; "
                    "run the encoder again for a new one"
                )
            # The cache takes the source keys/values over: popping them from encoder_out spares
            # fairseq's per-step reorder_encoder_out from copying them a second time.
            keys, values = encoder_out.pop("keys"), encoder_out.pop("values")
            cache = {"padding": encoder_out["source_padding"][0]}
            for i in range(len(stack.layers)):
                cache[f"k{i}"], cache[f"v{i}"] = keys[i], values[i]
            self.set_incremental_state(incremental_state, "cache", cache)
            return stack.lm_head(encoder_out["sep_state"][0])
        cache = self.get_incremental_state(incremental_state, "cache")
        old = cache["padding"]
        padding = torch.cat([old, old.new_zeros(old.size(0), 1)], 1)
        source_padding = encoder_out["source_padding"][0]
        n_source = (~source_padding).sum(1, keepdim=True)
        keys = padding.size(1)  # <s> source </s> and the target so far, the newest token last
        target = torch.arange(keys, device=padding.device) >= source_padding.size(1)
        segments = target.long().expand_as(padding)
        rule = predicates.and_masks(stack.attention_rule(segments), predicates.padding(padding))
        allowed = step_mask(rule, padding.size(0), 1, keys - 1, keys, device=padding.device)[:, 0]
        token = prev_output_tokens[:, -1:]
        past = [(cache[f"k{i}"], cache[f"v{i}"]) for i in range(len(stack.layers))]
        x, kvs = stack.hidden_states(
            token, n_source - 1 + step, torch.ones_like(token), allowed, past=past
        )
        cache["padding"] = padding
        for i, (k, v) in enumerate(kvs):
            cache[f"k{i}"], cache[f"v{i}"] = k, v
        self.set_incremental_state(incremental_state, "cache", cache)
        return stack.lm_head(x)

    def reorder_incremental_state(self, incremental_state, new_order: Tensor):
        cache = self.get_incremental_state(incremental_state, "cache")
        if cache is not None:
            cache = {k: v.index_select(0, new_order) for k, v in cache.items()}
            self.set_incremental_state(incremental_state, "cache", cache)

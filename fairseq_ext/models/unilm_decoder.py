"""``unilm_transformer`` as fairseq's incremental decoder: one target token per step against the
cached keys/values under one row of the variant's rule (``masking.step_mask``); a variant that
is not incremental re-runs the whole sequence."""

from __future__ import annotations

from typing import Dict, List, Optional

import torch
from fairseq.models import FairseqIncrementalDecoder
from torch import Tensor

from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.masking import predicates, step_mask
from fairseq_ext.models.unilm_stack import UniLMStack


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
            return self.stack.seq2seq_logits(encoder_out["src_tokens"][0], prev_output_tokens), {
                "attn": None
            }
        return self._step(prev_output_tokens, encoder_out, incremental_state), {"attn": None}

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
        padding = torch.cat(
            [cache["padding"], cache["padding"].new_zeros(cache["padding"].size(0), 1)], 1
        )
        source_padding = encoder_out["source_padding"][0]
        n_source = (~source_padding).sum(1, keepdim=True)
        keys = padding.size(1)  # <s> source </s> and the target so far, the newest token last
        segments = (
            (torch.arange(keys, device=padding.device) >= source_padding.size(1))
            .long()
            .expand_as(padding)
        )
        allowed = step_mask(
            predicates.and_masks(stack.attention_rule(segments), predicates.padding(padding)),
            padding.size(0),
            1,
            keys - 1,
            keys,
            device=padding.device,
        )[:, 0]
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

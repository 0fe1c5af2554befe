"""Beam search that stops at the first non-finite model output (NaN or +Inf: damaged weights, an
overflow in half precision) with one line naming the batch's sentences, instead of printing
empty hypotheses or failing on fairseq's ``assert``; ``unilm_transformer``'s beam search."""

from __future__ import annotations

import torch
from fairseq.sequence_generator import SequenceGenerator

from fairseq_ext.common.errors import FairseqExtError


def refuse_non_finite(values: torch.Tensor, sample: dict, what: str) -> None:
    """Raise if ``values`` (a model output for ``sample``) holds NaN or +Inf (-Inf is a
    log-probability of 0 and allowed)."""
    if values is None or not bool((torch.isnan(values) | torch.isposinf(values)).any()):
        return
    ids = sample["id"].tolist() if "id" in sample else []
    shown = ", ".join(map(str, ids[:5])) + (", ..." if len(ids) > 5 else "")
    raise FairseqExtError(
        f"decoding the batch of sentence ids {shown} gave non-finite {what} (NaN or Inf): the "
        "model's outputs are not finite, so its hypotheses would be empty or garbage; nothing "
        "more is decoded. Decode with an earlier checkpoint, or in float32 (without --fp16/--bf16)"
    )


class FiniteScoresSequenceGenerator(SequenceGenerator):
    """fairseq's ``SequenceGenerator`` that refuses non-finite log-probabilities at every step."""

    def __init__(self, models, tgt_dict, **kwargs):
        super().__init__(models, tgt_dict, **kwargs)
        forward_decoder = self.model.forward_decoder
        self._sample = {}

        def checked_forward_decoder(*args, **kw):
            lprobs, attn = forward_decoder(*args, **kw)
            refuse_non_finite(lprobs, self._sample, "log-probabilities")
            return lprobs, attn

        self.model.forward_decoder = checked_forward_decoder

    def _generate(self, sample, *args, **kwargs):
        self._sample = sample
        return super()._generate(sample, *args, **kwargs)


class UniLMSequenceGenerator(FiniteScoresSequenceGenerator):
    """Beam search for ``unilm_transformer`` (Dong et al. 2019) whose ``max_len`` leaves room for
    the source in the positions table both share (``<s> source </s> target``)."""

    def __init__(self, models, tgt_dict, **kwargs):
        super().__init__(models, tgt_dict, **kwargs)
        self._configured_max_len = self.max_len
        self._positions = min(m.encoder.max_positions() for m in self.model.models)

    def _generate(self, sample, *args, **kwargs):
        source_width = sample["net_input"]["src_tokens"].size(1)  # with </s>; <s> is position 0
        # target token t (1-based) is fed at position source_width + t, and fairseq feeds
        # token max_len too (the step that forces </s>): max_len <= positions - 1 - width
        self.max_len = min(self._configured_max_len, self._positions - source_width)
        return super()._generate(sample, *args, **kwargs)

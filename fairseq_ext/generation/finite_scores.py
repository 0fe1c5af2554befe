"""Decoding stops at the first non-finite model output (NaN or +Inf: damaged weights, an
overflow in half precision) with one line naming the batch's sentences, instead of printing
empty hypotheses or failing on fairseq's ``assert``."""

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

    def _generate(self, sample, prefix_tokens=None, constraints=None, bos_token=None):
        self._sample = sample
        return super()._generate(
            sample, prefix_tokens=prefix_tokens, constraints=constraints, bos_token=bos_token
        )

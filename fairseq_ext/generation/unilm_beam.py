"""Beam search for ``unilm_transformer`` (Dong et al. 2019): fairseq's ``SequenceGenerator``
whose output length leaves room for the source in the positions table both share
(``<s> source </s> target``); a non-finite score stops decoding (``finite_scores``).
"""

from __future__ import annotations

from fairseq_ext.generation.finite_scores import FiniteScoresSequenceGenerator


class UniLMSequenceGenerator(FiniteScoresSequenceGenerator):
    """``SequenceGenerator`` whose ``max_len`` leaves room for the source's positions."""

    def __init__(self, models, tgt_dict, **kwargs):
        super().__init__(models, tgt_dict, **kwargs)
        self._configured_max_len = self.max_len
        self._positions = min(m.encoder.max_positions() for m in self.model.models)

    def _generate(self, sample, prefix_tokens=None, constraints=None, bos_token=None):
        source_width = sample["net_input"]["src_tokens"].size(1)  # with </s>; <s> is position 0
        # target token t (1-based) is fed at position source_width + t, and fairseq feeds
        # token max_len too (the step that forces </s>): max_len <= positions - 1 - width
        self.max_len = min(self._configured_max_len, self._positions - source_width)
        return super()._generate(
            sample, prefix_tokens=prefix_tokens, constraints=constraints, bos_token=bos_token
        )

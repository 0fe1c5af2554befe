"""What the plugin's models ask of the task that builds them, as abstract classes a task implements
(UniLM: Dong et al. 2019, section 2; Wagner et al. 2020, section 2.1)."""

from __future__ import annotations

from abc import ABC, abstractmethod


class UniLMTask(ABC):
    """A task that builds ``unilm_transformer`` (``unilm_seq2seq``, ``permutation_lm``): the
    attention mask its data are laid out for, which the model runs when ``--attention-mask``
    is not given."""

    @abstractmethod
    def default_attention_mask(self) -> str:
        """A key of ``masking.ATTENTION_VARIANTS``."""


class PositionMaskingTask(ABC):
    """A task that masks positions (``position_masked_lm``): its batches carry
    ``net_input["src_positions"]`` and ``position_target`` ``(B, T)``, which
    ``position_masked_roberta`` reads."""

    @abstractmethod
    def longest_example(self) -> int:
        """The most tokens (``<s>`` included) an example of the task has: the position
        classifier needs one class per position."""

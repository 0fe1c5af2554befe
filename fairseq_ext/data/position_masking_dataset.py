"""Dataset side of ``position_masked_lm``: one draw of token and position masking per
example and epoch, and the four tensors the model and criterion read from it."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
from fairseq.data import BaseWrapperDataset, Dictionary

from fairseq_ext.common.errors import require
from fairseq_ext.masking import bert_token_mask, example_rng, position_mask

# Label of the tokens whose position the classifier does not predict (and of padding);
# torch's cross-entropy ignores it by default.
NO_POSITION_LABEL = -100
POSITION_MASK_SOURCES = ("independent", "token_masked")


class PositionMaskingDataset(BaseWrapperDataset):
    """Token blocks (each starting with ``<s>``) as dicts of ``source`` (BERT's 80/10/10 token
    masking), ``target`` (the original ids at the token-masked positions, else padding, as
    ``masked_lm``), ``positions`` (``MASK_POSITION`` where position-masked, 90/5/5) and
    ``position_target`` (the original index there, else ``NO_POSITION_LABEL``). Each example
    draws from ``masking.example_rng(seed, epoch, index)`` as fairseq's ``MaskTokensDataset``,
    token masking first, so with ``mask_special_tokens`` it is fairseq's draw for draw."""

    def __init__(
        self,
        dataset,
        dictionary: Dictionary,
        mask_idx: int,
        split: str,
        seed: int = 1,
        mask_prob: float = 0.15,
        leave_unmasked_prob: float = 0.1,
        random_token_prob: float = 0.1,
        freq_weighted_replacement: bool = False,
        position_mask_prob: float = 0.10,
        position_keep_prob: float = 0.05,
        position_random_prob: float = 0.05,
        position_mask_source: str = "independent",
        mask_special_tokens: bool = False,
    ):
        super().__init__(dataset)
        require(
            position_mask_source in POSITION_MASK_SOURCES,
            f"--position-mask-source {position_mask_source!r} is unknown; choose one of "
            f"{', '.join(POSITION_MASK_SOURCES)}",
        )
        self.dictionary = dictionary
        self.mask_idx = mask_idx
        self.split = split
        self.seed = seed
        self.token_options = dict(
            mask_prob=mask_prob,
            leave_unmasked_prob=leave_unmasked_prob,
            random_token_prob=random_token_prob,
        )
        self.position_options = dict(
            prob=position_mask_prob, keep_prob=position_keep_prob, random_prob=position_random_prob
        )
        self.position_mask_source = position_mask_source
        self.mask_special_tokens = mask_special_tokens
        self.specials = np.array(
            sorted({dictionary.bos(), dictionary.eos(), dictionary.pad(), mask_idx})
        )
        self.replacement_weights = None
        if random_token_prob > 0.0:
            weights = (
                np.array(dictionary.count, dtype=np.float64)
                if freq_weighted_replacement
                else np.ones(len(dictionary))
            )
            weights[: dictionary.nspecial] = 0
            self.replacement_weights = weights / weights.sum()
        self.epoch = 0

    @property
    def can_reuse_epoch_itr_across_epochs(self):
        return True  # only the noise changes with the epoch, not the sizes

    def set_epoch(self, epoch, **unused):
        super().set_epoch(epoch)
        self.epoch = epoch

    def __getitem__(self, index: int) -> dict:
        return self._draw(self.seed, self.epoch, index)

    @lru_cache(maxsize=16)
    def _draw(self, seed: int, epoch: int, index: int) -> dict:
        rng = example_rng(seed, epoch, index)
        item = self.dataset[index]
        item = item.numpy() if torch.is_tensor(item) else np.asarray(item)
        require(
            not (item == self.mask_idx).any(),
            f"{self.split} example {index} contains the <mask> symbol itself; remove the "
            "literal '<mask>' from the text before fairseq-preprocess",
        )
        ordinary = ~np.isin(item, self.specials)
        token_maskable = np.ones(len(item), dtype=bool) if self.mask_special_tokens else ordinary
        tokens = bert_token_mask(
            item,
            token_maskable,
            rng,
            self.mask_idx,
            replacement_weights=self.replacement_weights,
            **self.token_options,
        )
        candidates = (
            ordinary & tokens.chosen if self.position_mask_source == "token_masked" else ordinary
        )
        positions = position_mask(candidates, rng, **self.position_options)
        target = np.full(len(item), self.dictionary.pad(), dtype=np.int64)
        target[tokens.chosen] = item[tokens.chosen]
        position_target = np.full(len(item), NO_POSITION_LABEL, dtype=np.int64)
        position_target[positions.chosen] = np.flatnonzero(positions.chosen)
        return {
            "source": torch.from_numpy(tokens.tokens.astype(np.int64)),
            "target": torch.from_numpy(target),
            "positions": torch.from_numpy(positions.positions),
            "position_target": torch.from_numpy(position_target),
        }

    def field(self, key: str) -> "FieldDataset":
        return FieldDataset(self, key)


class FieldDataset(BaseWrapperDataset):
    """One tensor of each item of a ``PositionMaskingDataset``."""

    def __init__(self, dataset: PositionMaskingDataset, key: str):
        super().__init__(dataset)
        self.key = key

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.dataset[index][self.key]

"""MASS-style span masking of monolingual text for ProphetNet's pre-training (Qi et al. 2020,
section 2.4; Song et al. 2019): per example and epoch, one span per block replaced 80/10/10 in
the encoder input (``masking.block_span_mask``, ``masking.replace_80_10_10``), the span tokens as
the decoder target at their article positions, and each target's offset in its span for
``criterions.ngram_language_loss``."""

from __future__ import annotations

import numpy as np
import torch
from fairseq.data import FairseqDataset, data_utils

from fairseq_ext.common.errors import require
from fairseq_ext.masking import block_span_mask, example_rng, replace_80_10_10, span_lengths


class MassSpanDataset(FairseqDataset):
    def __init__(
        self,
        tokens: FairseqDataset,
        sizes: np.ndarray,
        dictionary,
        mask_idx: int,
        seed: int,
        block_size: int = 64,
        ratio: float = 0.15,
        shuffle: bool = True,
    ):
        self.tokens = tokens
        self.src_sizes = np.asarray(sizes)
        self.dictionary = dictionary
        self.mask_idx = mask_idx
        self.seed = seed
        self.block_size = block_size
        self.ratio = ratio
        self.shuffle = shuffle
        self.epoch = 1
        self.tgt_sizes = span_lengths(self.src_sizes - 1, block_size, ratio)
        # BERT's random replacement: uniform over the ordinary tokens before <mask>.
        require(
            mask_idx > dictionary.nspecial,
            f"<mask> has id {mask_idx}, but the ordinary tokens that replace 10% of the span start "
            f"at {dictionary.nspecial}; add <mask> after the data's dictionary",
        )
        self.replacement_weights = np.zeros(len(dictionary))
        self.replacement_weights[dictionary.nspecial : mask_idx] = 1.0 / (
            mask_idx - dictionary.nspecial
        )

    @property
    def sizes(self):
        return self.src_sizes

    def set_epoch(self, epoch, **unused):
        self.epoch = epoch

    @property
    def can_reuse_epoch_itr_across_epochs(self):
        return False

    def __len__(self):
        return len(self.tokens)

    def __getitem__(self, index):
        rng = example_rng(self.seed, self.epoch, index)
        tokens = self.tokens[index]
        d = self.dictionary
        maskable = tokens.ne(d.eos()) & tokens.ne(d.pad()) & tokens.ne(d.bos())
        chosen = block_span_mask(maskable.numpy(), rng, self.block_size, self.ratio)
        source = replace_80_10_10(
            tokens.numpy(), chosen, rng, self.mask_idx, replacement_weights=self.replacement_weights
        ).values
        where = torch.from_numpy(np.flatnonzero(chosen))
        before = tokens.new_full(where.shape, d.eos())
        has_before = where > 0
        before[has_before] = tokens[where[has_before] - 1]
        new_span = torch.ones_like(where, dtype=torch.bool)
        new_span[1:] = where[1:] != where[:-1] + 1
        span_start = where[new_span][new_span.long().cumsum(0) - 1]
        return {
            "id": index,
            "source": torch.from_numpy(source),
            "target": tokens[where],
            "prev_output_tokens": before,
            "positions": where + d.pad() + 1,
            "span_offset": where - span_start,
        }

    def collater(self, samples):
        if not samples:
            return {}
        pad, eos = self.dictionary.pad(), self.dictionary.eos()

        def merge(key, left_pad, pad_idx=pad):
            return data_utils.collate_tokens([s[key] for s in samples], pad_idx, eos, left_pad)

        source = merge("source", left_pad=True)
        target = merge("target", left_pad=False)
        return {
            "id": torch.LongTensor([s["id"] for s in samples]),
            "nsentences": len(samples),
            "ntokens": int(target.ne(pad).sum()),
            "net_input": {
                "src_tokens": source,
                "src_lengths": torch.LongTensor([len(s["source"]) for s in samples]),
                "prev_output_tokens": merge("prev_output_tokens", left_pad=False),
                "decoder_positions": merge("positions", left_pad=False),
            },
            "target": target,
            "span_offset": merge("span_offset", left_pad=False, pad_idx=0),
        }

    def num_tokens(self, index):
        return max(int(self.src_sizes[index]), int(self.tgt_sizes[index]))

    def size(self, index):
        return int(self.src_sizes[index]), int(self.tgt_sizes[index])

    def num_tokens_vec(self, indices):
        return np.maximum(self.src_sizes[indices], self.tgt_sizes[indices])

    def ordered_indices(self):
        order = np.random.permutation(len(self)) if self.shuffle else np.arange(len(self))
        return order[np.argsort(self.src_sizes[order], kind="mergesort")]

    @property
    def supports_prefetch(self):
        return getattr(self.tokens, "supports_prefetch", False)

    def prefetch(self, indices):
        self.tokens.prefetch(indices)

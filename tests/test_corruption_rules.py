"""One rule per corruption: every caller of BERT's 80/10/10, of the MASS span count and of the
HI-CMLM strategy table draws or reads the one implementation in ``fairseq_ext.masking``, and
the datasets draw from the one per-example generator, ``example_rng`` (fairseq's scheme)."""

from argparse import Namespace
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from fairseq.data import Dictionary, ListDataset, MaskTokensDataset

from fairseq_ext.analysis.iterations import copy_counts
from fairseq_ext.data import PositionMaskingDataset
from fairseq_ext.data.mass_span_dataset import MassSpanDataset
from fairseq_ext.masking import (
    HYBRID_STRATEGIES,
    MASK_POSITION,
    bert_token_mask,
    block_span_mask,
    decoding_copies_source,
    example_rng,
    position_mask,
    replace_80_10_10,
    source_copy_weight,
    span_lengths,
)
from fairseq_ext.masking.corruption import choose_share
from fairseq_ext.masking.hybrid import STRATEGY_TABLE, HybridStrategy
from fairseq_ext.models.hi_cmlm_transformer import HybridInputDecoder, uses_source_copy


def _dictionary(words=40):
    d = Dictionary()
    for i in range(words):
        d.add_symbol(f"w{i}", n=i + 1)
    return d, d.add_symbol("<mask>")


def _lines(d, mask_idx, lengths, seed=0):
    rng = np.random.default_rng(seed)
    return [
        torch.from_numpy(np.append(rng.integers(d.nspecial, mask_idx, n), d.eos())) for n in lengths
    ]


# --------------------------------------------------------------------------- BERT's 80/10/10
@pytest.mark.parametrize("seed", range(20))
def test_token_and_position_masking_are_choose_share_then_replace_80_10_10(seed):
    """Same generator state, same corruption: both of Wagner et al.'s (2020) masks are the one
    BERT rule, not a copy of it."""
    draw = np.random.default_rng(100 + seed)
    length = int(draw.integers(3, 80))
    tokens = draw.integers(4, 49, length)
    maskable = draw.random(length) < 0.9
    weights = np.full(50, 1 / 45)
    weights[[0, 1, 2, 3, 49]] = 0
    got = bert_token_mask(
        tokens,
        maskable,
        np.random.default_rng(seed),
        49,
        mask_prob=0.3,
        leave_unmasked_prob=0.2,
        random_token_prob=0.2,
        replacement_weights=weights,
    )
    rng = np.random.default_rng(seed)
    chosen = choose_share(maskable, 0.3, rng)
    want = replace_80_10_10(
        tokens, chosen, rng, 49, keep_prob=0.2, random_prob=0.2, replacement_weights=weights
    )
    assert np.array_equal(got.chosen, chosen) and np.array_equal(got.tokens, want.values)

    got = position_mask(
        maskable, np.random.default_rng(seed), prob=0.3, keep_prob=0.2, random_prob=0.2
    )
    rng = np.random.default_rng(seed)
    chosen = choose_share(maskable, 0.3, rng)
    assert np.array_equal(got.chosen, chosen)
    if chosen.any():
        want = replace_80_10_10(
            np.arange(length),
            chosen,
            rng,
            MASK_POSITION,
            keep_prob=0.2,
            random_prob=0.2,
            replacement_weights=np.full(length, 1 / length),
        )
        assert np.array_equal(got.positions, want.values)
    else:
        assert np.array_equal(got.positions, np.arange(length))


def test_example_rng_is_fairseq_mask_tokens_dataset_scheme():
    """PositionMaskingDataset, which draws from example_rng, equals fairseq's MaskTokensDataset
    (the independent reference) draw for draw when only tokens are masked, in several epochs."""
    d, mask_idx = _dictionary()
    items = _lines(d, mask_idx, np.random.default_rng(1).integers(2, 60, 120))
    items = [torch.cat([torch.tensor([d.bos()]), x]) for x in items]
    ours = PositionMaskingDataset(
        ListDataset(items, np.array([len(x) for x in items])),
        d,
        mask_idx,
        "train",
        seed=7,
        freq_weighted_replacement=True,
        position_mask_prob=0.0,
        mask_special_tokens=True,
    )
    src, tgt = MaskTokensDataset.apply_mask(
        items, d, pad_idx=d.pad(), mask_idx=mask_idx, seed=7, freq_weighted_replacement=True
    )
    for epoch in (1, 2, 5):
        for dataset in (ours, src, tgt):
            dataset.set_epoch(epoch)
        for index in range(len(items)):
            assert torch.equal(ours[index]["source"], src[index]), (epoch, index)
            assert torch.equal(ours[index]["target"], tgt[index]), (epoch, index)


def test_position_masking_dataset_draws_the_masking_rules():
    d, mask_idx = _dictionary()
    items = [torch.cat([torch.tensor([d.bos()]), x]) for x in _lines(d, mask_idx, range(1, 40))]
    data = PositionMaskingDataset(
        ListDataset(items, np.array([len(x) for x in items])),
        d,
        mask_idx,
        "train",
        seed=3,
        position_mask_prob=0.3,
    )
    weights = np.ones(len(d))
    weights[: d.nspecial] = 0
    weights /= weights.sum()
    for epoch in (1, 4):
        data.set_epoch(epoch)
        for index, item in enumerate(items):
            rng = example_rng(3, epoch, index)
            ordinary = ~np.isin(item.numpy(), [d.bos(), d.eos(), d.pad(), mask_idx])
            tokens = bert_token_mask(
                item.numpy(), ordinary, rng, mask_idx, replacement_weights=weights
            )
            positions = position_mask(ordinary, rng, prob=0.3)
            got = data[index]
            assert np.array_equal(got["source"].numpy(), tokens.tokens)
            assert np.array_equal(got["positions"].numpy(), positions.positions)
            assert np.array_equal(got["position_target"].numpy() >= 0, positions.chosen)


# --------------------------------------------------------------------------- MASS spans
def test_mass_span_dataset_draws_block_span_mask_and_replace_80_10_10():
    """The dataset's spans are block_span_mask's, its sizes span_lengths', its encoder input
    replace_80_10_10's (uniform over the ordinary tokens before <mask>), all from example_rng."""
    d, mask_idx = _dictionary(30)
    lines = _lines(d, mask_idx, [1, 2, 9, 63, 64, 65, 130, 200], seed=2)
    sizes = np.array([len(x) for x in lines])
    data = MassSpanDataset(ListDataset(lines, sizes), sizes, d, mask_idx, seed=5)
    weights = np.zeros(len(d))
    weights[d.nspecial : mask_idx] = 1 / (mask_idx - d.nspecial)
    for epoch in (1, 3):
        data.set_epoch(epoch)
        for index, line in enumerate(lines):
            rng = example_rng(5, epoch, index)
            maskable = line.numpy() != d.eos()
            chosen = block_span_mask(maskable, rng)
            source = replace_80_10_10(
                line.numpy(), chosen, rng, mask_idx, replacement_weights=weights
            ).values
            item = data[index]
            assert torch.equal(item["source"], torch.from_numpy(source))
            assert torch.equal(item["target"], line[torch.from_numpy(chosen)])
            assert data.tgt_sizes[index] == len(item["target"]) == int(span_lengths(len(line) - 1))


# --------------------------------------------------------------------------- HI-CMLM table
def test_decoding_copies_source_follows_the_decoding_rule():
    masked = torch.ones(1, 6, dtype=torch.bool)
    masked[0, 0] = False
    for strategy in HYBRID_STRATEGIES:
        assert decoding_copies_source(strategy) == bool(
            source_copy_weight(masked, strategy, 0.6, "mask").any()
        )
    with pytest.raises(ValueError, match="unknown hybrid strategy"):
        decoding_copies_source("half_copied")


def test_model_and_analysis_read_the_strategy_table(monkeypatch):
    """Change a row of STRATEGY_TABLE and the model's decoding input, its choice of code path
    and the analysis of printed passes all follow: none restates the table."""
    monkeypatch.setitem(
        STRATEGY_TABLE, "all_copied", HybridStrategy(True, lambda m, w, first: m * 0.25)
    )
    monkeypatch.setitem(
        STRATEGY_TABLE, "all_mask", HybridStrategy(True, lambda m, w, first: m * 0.5)
    )
    line = ["<unk>", "a", "<unk>", "<unk>"]
    assert copy_counts(line, "all_copied", 0.6, "mask") == (0.75, 3, 4)
    assert copy_counts(line, "all_mask", 0.6, "mask") == (1.5, 3, 4)

    unk = 3
    prev = torch.tensor([[0, unk, 7, unk, 2]])
    for strategy, share in (("all_copied", 0.25), ("all_mask", 0.5)):
        decoder = SimpleNamespace(
            _training=False, unk=unk, hybrid_strategy=strategy, mask_weight=0.6, fence_first="mask"
        )
        assert HybridInputDecoder.copy_weight(decoder, prev).tolist() == [
            [0.0, share, 0.0, share, 0.0]
        ]
        assert HybridInputDecoder.copies_source(decoder)
        args = Namespace(
            hybrid_strategy=strategy, train_decoder_input="paper", train_copy_share=0.0
        )
        assert uses_source_copy(args)

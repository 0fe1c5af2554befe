"""The examples of a one-stack language-model task as fairseq's ``masked_lm`` batches them
(``permutation_lm``, ``position_masked_lm``)."""

from __future__ import annotations

from typing import Optional

import numpy as np
from fairseq.data import (
    FairseqDataset,
    IdDataset,
    NestedDictionaryDataset,
    NumelDataset,
    NumSamplesDataset,
    RightPadDataset,
    SortDataset,
    data_utils,
)


def language_model_batches(
    source: FairseqDataset,
    target: FairseqDataset,
    *,
    pad: int,
    seed: int,
    counted: FairseqDataset,
    net_input: Optional[dict] = None,
    fields: Optional[dict] = None,
) -> SortDataset:
    """One example per row of ``source``: ``id``, ``net_input`` (``src_tokens`` and
    ``src_lengths`` of ``source``, plus ``net_input``), ``target``, the extra ``fields``,
    ``nsentences`` and ``ntokens`` (the tokens of ``counted``), right-padded with ``pad`` and
    ordered as ``masked_lm`` orders them: a permutation drawn from ``seed``, then by length."""
    dataset = NestedDictionaryDataset(
        {
            "id": IdDataset(),
            "net_input": {
                "src_tokens": RightPadDataset(source, pad_idx=pad),
                "src_lengths": NumelDataset(source, reduce=False),
                **(net_input or {}),
            },
            "target": RightPadDataset(target, pad_idx=pad),
            **(fields or {}),
            "nsentences": NumSamplesDataset(),
            "ntokens": NumelDataset(counted, reduce=True),
        },
        sizes=[source.sizes],
    )
    with data_utils.numpy_seed(seed):
        shuffle = np.random.permutation(len(dataset))
    return SortDataset(dataset, sort_order=[shuffle, source.sizes])

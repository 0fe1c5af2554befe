"""``--keep-tokens FILE`` (Su 2019's ``keep_tokens``, section "Brief Explanation"): one list of
kept tokens prunes the dictionary, maps the binarized data to the pruned ids (a token outside
the list becomes ``<unk>``) and selects the rows of a pretrained model's embedding and output
layer (``models.unilm_init``)."""

from __future__ import annotations

from typing import Iterable

import torch
from fairseq.data import BaseWrapperDataset, Dictionary

from fairseq_ext.common.errors import FairseqExtError


def read_keep_list(path: str) -> list[str]:
    """Tokens listed in ``path``: the first field of every non-empty line (a fairseq
    ``dict.txt`` is a valid list)."""
    try:
        with open(path, encoding="utf-8") as f:
            tokens = [line.split()[0] for line in f if line.strip()]
    except OSError as exc:
        raise FairseqExtError(f"--keep-tokens {path}: cannot read it ({exc.strerror})") from None
    if not tokens:
        raise FairseqExtError(
            f"--keep-tokens {path} lists no token; write one token per line "
            "(data_prep/keep_tokens.py builds one from the data)"
        )
    return tokens


def prune_dictionary(
    full: Dictionary, keep: Iterable[str], source: str = "--keep-tokens"
) -> tuple[Dictionary, torch.Tensor, torch.Tensor]:
    """``(pruned, keep_ids, lookup)``: ``full``'s specials and the kept tokens in ``full``'s order,
    the full id of each pruned token, and the pruned id of each full token (``<unk>`` if not
    kept)."""
    wanted = set()
    for i, token in enumerate(keep):
        if token not in full.indices:
            raise FairseqExtError(
                f"{source}: token {token!r} (entry {i + 1}) is not in the data's "
                "dictionary; list tokens of the dictionary the data was binarized with"
            )
        wanted.add(full.indices[token])
    pruned = Dictionary(bos=full.bos_word, pad=full.pad_word, eos=full.eos_word, unk=full.unk_word)
    specials = {full.bos(), full.pad(), full.eos(), full.unk()}
    if [pruned.index(full[i]) for i in sorted(specials)] != sorted(specials):
        raise FairseqExtError(
            f"{source}: the data's dictionary has its special tokens at unusual ids"
        )
    keep_ids = list(range(pruned.nspecial))
    for j in range(full.nspecial, len(full)):
        if j in wanted:
            pruned.add_symbol(full[j], n=full.count[j])
            keep_ids.append(j)
    lookup = torch.full((len(full),), full.unk(), dtype=torch.long)
    lookup[torch.tensor(keep_ids)] = torch.arange(len(keep_ids))
    return pruned, torch.tensor(keep_ids), lookup


class RemapTokensDataset(BaseWrapperDataset):
    """Token ids of the full dictionary, seen through ``lookup`` (full -> pruned)."""

    def __init__(self, dataset, lookup: torch.Tensor):
        super().__init__(dataset)
        self.lookup = lookup

    def __getitem__(self, index):
        return self.lookup[self.dataset[index].long()]


def count_unmapped(dataset, lookup: torch.Tensor, unk: int) -> tuple[int, int]:
    """``(tokens that become <unk> without being <unk>, all tokens)`` of a raw split."""
    lost = total = 0
    for i in range(len(dataset)):
        ids = dataset[i].long()
        lost += int((lookup[ids].eq(unk) & ids.ne(unk)).sum())
        total += ids.numel()
    return lost, total

"""A data folder as fairseq-preprocess should have left it: readable, its dictionaries whole
(``check_data_folder``), no split with one side of its pair only, as a killed fairseq-preprocess
leaves it (``refuse_half_made_pair``); run before any work by ``fairseq_changes.preflight``."""

from __future__ import annotations

import glob
import os
from typing import Optional

from fairseq import utils
from fairseq.data import data_utils

from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.common.paths import refuse_cut_dictionary, require_readable_folder

DATA_FIX = "give the folder fairseq-preprocess wrote (its --destdir)"


def _shards(folder: str, split: str) -> list[str]:
    """``split`` and the shards fairseq reads after it (``split1``, ``split2``, ...) that have a
    file in ``folder``."""
    names, k = [split], 1
    while glob.glob(os.path.join(glob.escape(folder), f"{split}{k}.*")):
        names.append(f"{split}{k}")
        k += 1
    return names


def refuse_half_made_pair(
    data: str, split: str, source: Optional[str], target: Optional[str]
) -> None:
    """Every folder of ``data`` that holds a file of ``split`` (and its shards) for the pair
    ``source``-``target`` (None: inferred as fairseq does) holds both sides whole, each an
    ``.idx`` and a ``.bin``, as a killed fairseq-preprocess does not leave them."""
    for folder in utils.split_paths(data):
        pair = (source, target) if source and target else data_utils.infer_language_pair(folder)
        if None in pair:
            continue
        for shard in _shards(folder, split):
            for a, b in (pair, pair[::-1]):
                stem = os.path.join(folder, f"{shard}.{a}-{b}")
                files = [f"{stem}.{side}.{ext}" for side in pair for ext in ("bin", "idx")]
                missing = [f for f in files if not os.path.isfile(f)]
                if missing and len(missing) < len(files):
                    have = ", ".join(os.path.basename(f) for f in files if f not in missing)
                    raise FairseqExtError(
                        f"{folder} holds half of the {shard} split: {have}, but not "
                        f"{', '.join(os.path.basename(f) for f in missing)}, as when "
                        "fairseq-preprocess is stopped before it ends (killed?); binarize the "
                        "data again into an empty --destdir (fairseq-preprocess refuses a folder "
                        "that holds its dictionaries: remove it first), or run the data_prep "
                        "script again, which replaces its folder only when complete"
                    )


def check_data_folder(folder: str, label: str = "data folder") -> None:
    """A data folder is readable, and so is each dictionary in it, none of them cut short or
    malformed (``checkpoints.dictionaries.refuse_malformed_dictionary``)."""
    from fairseq_ext.checkpoints.dictionaries import refuse_malformed_dictionary

    require_readable_folder(folder, label, DATA_FIX)
    for dictionary in sorted(glob.glob(os.path.join(glob.escape(folder), "dict.*txt"))):
        refuse_cut_dictionary(dictionary)
        refuse_malformed_dictionary(dictionary)

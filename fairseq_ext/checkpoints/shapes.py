"""Loading a checkpoint into a model: one error naming what differs, not torch's size list."""

from __future__ import annotations

import itertools
import re
from typing import Sequence, Union

import torch

from fairseq_ext.common.errors import FairseqExtError

_VOCAB_PARAMS = (
    "embed_tokens.weight",
    "output_projection.weight",
    "lm_head.weight",
    "lm_head.bias",
)
_TARGET_SIDE = ("decoder.", "output_projection", "lm_head")
DICTIONARY_FIX = (
    "binarize the data with the checkpoint's dictionary (fairseq-preprocess --srcdict DICT "
    "[--tgtdict DICT]) or give the data directory it was trained with"
)


def _differences(checkpoint: Sequence[str], data: Sequence[str], shown: int = 3) -> str:
    pairs = itertools.zip_longest(map(repr, checkpoint), map(repr, data), fillvalue="nothing")
    diffs = [(i, a, b) for i, (a, b) in enumerate(pairs) if a != b][:shown]
    return "; ".join(
        f"entry {i} is {a} in the checkpoint's, {b} in the data's" for i, a, b in diffs
    )


def dictionary_mismatch(
    side: str,
    checkpoint: Union[Sequence[str], int],
    data: Union[Sequence[str], int],
    *,
    where: str = "the checkpoint",
    rows_of: str = "",
    hint: str = "",
) -> FairseqExtError:
    """The error for a ``side`` dictionary that is not the checkpoint's."""
    if isinstance(checkpoint, int):
        detail = (
            f"{where}'s {rows_of} has {checkpoint} rows, the data's {side} dictionary has {data} "
            "entries"
        )
    else:
        size = (
            f"the same {len(data)} entries in another order"
            if sorted(checkpoint) == sorted(data)
            else f"{len(checkpoint)} entries in {where}'s, {len(data)} in the data's"
        )
        detail = f"{size}: {_differences(checkpoint, data)}"
    return FairseqExtError(
        f"dictionary mismatch: the {side} dictionary of the data is not the one {where} was "
        f"trained with ({detail}); {DICTIONARY_FIX}{hint}"
    )


def check_state_dict_shapes(
    model: torch.nn.Module,
    state_dict: dict,
    shape_options: tuple[tuple[str, str], ...] = (),
    dictionary_hint: str = "",
) -> None:
    """Raise ``FairseqExtError`` naming the first parameter whose shape differs and the option
    (``shape_options``: parameter-name suffix, option) or dictionary behind it."""
    own = model.state_dict()
    differing = [
        (name, value, own[name])
        for name, value in state_dict.items()
        if name in own and hasattr(value, "shape") and own[name].shape != value.shape
    ]

    def vocabulary_first(item):  # a wider embedding first, then other rows, then the rest
        name, value, mine = item
        if not name.endswith(_VOCAB_PARAMS):
            return 2
        return 0 if value.shape[1:] != mine.shape[1:] else 1

    if not differing:
        return
    name, value, mine = min(differing, key=vocabulary_first)
    shapes = (
        f"the checkpoint's {name} has shape {tuple(value.shape)}, this model's {tuple(mine.shape)}"
    )
    stack = "decoder" if name.startswith("decoder.") else "encoder"
    named = [option for suffix, option in shape_options if name.endswith(suffix)]
    if name.endswith(_VOCAB_PARAMS) and value.shape[1:] == mine.shape[1:]:
        side = "target" if name.startswith(_TARGET_SIDE) or ".decoder." in name else "source"
        rows = (int(value.shape[0]), int(mine.shape[0]))
        raise dictionary_mismatch(side, *rows, rows_of=name, hint=dictionary_hint)
    if name.endswith(_VOCAB_PARAMS):
        said, use = f"--{stack}-embed-dim", f"--arch and --{stack}-embed-dim"
    elif named:
        said = use = named[0]
    elif name.endswith(("fc1.weight", "fc1.bias", "fc2.weight")) and value.dim() >= 1:
        said = f"--{stack}-ffn-embed-dim (or the embedding dimension)"
        use = f"--arch and --{stack}-ffn-embed-dim"
    else:
        raise FairseqExtError(
            f"{shapes}; use the --arch and size options the checkpoint was trained with"
        )
    raise FairseqExtError(
        f"{said} differs from the checkpoint's ({shapes}); use the {use} the checkpoint was "
        "trained with"
    )


def _key_list(text: str, kind: str) -> str:
    match = re.search(rf"{kind} key\(s\) in state_dict: (.*)", text)
    if match is None:
        return ""
    keys = match.group(1).rstrip(". ")
    return f"{kind.lower()}: {keys[:160]}{'...' if len(keys) > 160 else ''}"


class CheckpointShapeCheckMixin:
    """Mix into a ``FairseqModel`` (first in the bases): ``load_state_dict`` checks shapes and
    parameter names first (``shape_options``, ``dictionary_hint``: class attributes)."""

    shape_options: tuple[tuple[str, str], ...] = ()
    dictionary_hint: str = ""

    def load_state_dict(self, state_dict, strict=True, model_cfg=None, args=None):
        check_state_dict_shapes(self, state_dict, self.shape_options, self.dictionary_hint)
        try:
            return super().load_state_dict(
                state_dict, strict=strict, model_cfg=model_cfg, args=args
            )
        except RuntimeError as exc:
            text = str(exc)
            if "Missing key(s)" not in text and "Unexpected key(s)" not in text:
                raise
            keys = "; ".join(
                k for k in (_key_list(text, "Missing"), _key_list(text, "Unexpected")) if k
            )
            raise FairseqExtError(
                f"the checkpoint's parameters do not match this {type(self).__name__} ({keys}); "
                "use the --arch and size options (e.g. --encoder-layers, --decoder-layers) it was "
                "trained with"
            ) from None

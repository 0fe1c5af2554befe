"""Loading a checkpoint into a model built from the current data: a clear error when the
dictionary, the sizes or the structure do not match, instead of torch's list of size
mismatches (which fairseq wraps in "please ensure that the architectures match")."""
from __future__ import annotations

import re

import torch

from fairseq_ext.errors import FairseqExtError

_VOCAB_PARAMS = ("embed_tokens.weight", "output_projection.weight", "lm_head.weight", "lm_head.bias")


def check_state_dict_shapes(model: torch.nn.Module, state_dict: dict,
                            shape_options: tuple[tuple[str, str], ...] = ()) -> None:
    """Raise ``FairseqExtError`` naming the first parameter whose shape differs.

    ``shape_options`` pairs a parameter-name suffix with the option that sets its shape
    (e.g. ``("ngram_embeddings.weight", "--ngram")``), so that the message names the option
    to change. Vocabulary-sized parameters are reported as a dictionary mismatch.
    """
    own = model.state_dict()
    for name, value in state_dict.items():
        if name not in own or not hasattr(value, "shape") or own[name].shape == value.shape:
            continue
        shapes = f"the checkpoint's {name} has shape {tuple(value.shape)}, this model's {tuple(own[name].shape)}"
        if name.endswith(_VOCAB_PARAMS):
            raise FairseqExtError(
                f"dictionary mismatch: the checkpoint's {name} has {value.shape[0]} entries but the "
                f"dictionary of the data has {own[name].shape[0]}; binarize the data with the "
                "checkpoint's dictionary (fairseq-preprocess --srcdict DICT [--tgtdict DICT])"
            )
        for suffix, option in shape_options:
            if name.endswith(suffix):
                raise FairseqExtError(
                    f"{option} differs from the checkpoint's ({shapes}); use the {option} the "
                    "checkpoint was trained with"
                )
        raise FairseqExtError(f"{shapes}; use the --arch and size options the checkpoint was trained with")


def _key_list(text: str, kind: str) -> str:
    match = re.search(rf"{kind} key\(s\) in state_dict: (.*)", text)
    if match is None:
        return ""
    keys = match.group(1).rstrip(". ")
    return f"{kind.lower()}: {keys[:160]}{'...' if len(keys) > 160 else ''}"


class CheckpointShapeCheckMixin:
    """Mix into a ``FairseqModel`` (before it in the bases): ``load_state_dict`` checks shapes
    first, and a checkpoint with other parameter names (another number of layers, another
    architecture) gets one message instead of torch's key lists. ``shape_options`` (a class
    attribute) names the option behind a parameter's shape."""

    shape_options: tuple[tuple[str, str], ...] = ()

    def load_state_dict(self, state_dict, strict=True, model_cfg=None, args=None):
        check_state_dict_shapes(self, state_dict, self.shape_options)
        try:
            return super().load_state_dict(state_dict, strict=strict, model_cfg=model_cfg, args=args)
        except RuntimeError as exc:
            text = str(exc)
            if "Missing key(s)" not in text and "Unexpected key(s)" not in text:
                raise
            keys = "; ".join(k for k in (_key_list(text, "Missing"), _key_list(text, "Unexpected")) if k)
            raise FairseqExtError(
                f"the checkpoint's parameters do not match this {type(self).__name__} ({keys}); use the "
                "--arch and size options (e.g. --encoder-layers, --decoder-layers) it was trained with"
            ) from None

"""Loading a checkpoint into a model built from the current data: a clear error when the
dictionary or the sizes do not match, instead of torch's list of size mismatches (or
fairseq's "please ensure that the architectures match")."""
from __future__ import annotations

import torch

from fairseq_ext.errors import FairseqExtError

_VOCAB_PARAMS = ("embed_tokens.weight", "output_projection.weight", "lm_head.weight", "lm_head.bias")


def check_state_dict_shapes(model: torch.nn.Module, state_dict: dict) -> None:
    """Raise ``FairseqExtError`` naming the first parameter whose shape differs."""
    own = model.state_dict()
    for name, value in state_dict.items():
        if name not in own or not hasattr(value, "shape") or own[name].shape == value.shape:
            continue
        if name.endswith(_VOCAB_PARAMS):
            raise FairseqExtError(
                f"dictionary mismatch: the checkpoint's {name} has {value.shape[0]} entries but the "
                f"dictionary of the data has {own[name].shape[0]}; binarize the data with the "
                "checkpoint's dictionary (fairseq-preprocess --srcdict DICT [--tgtdict DICT])"
            )
        raise FairseqExtError(
            f"the checkpoint's {name} has shape {tuple(value.shape)} but this model's has "
            f"{tuple(own[name].shape)}; use the --arch and size options the checkpoint was trained with"
        )


class CheckpointShapeCheckMixin:
    """Mix into a ``FairseqModel`` (before it in the bases): ``load_state_dict`` checks shapes first."""

    def load_state_dict(self, state_dict, strict=True, model_cfg=None, args=None):
        check_state_dict_shapes(self, state_dict)
        return super().load_state_dict(state_dict, strict=strict, model_cfg=model_cfg, args=args)

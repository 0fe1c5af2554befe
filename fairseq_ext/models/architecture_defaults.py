"""Defaults of the plugin's architectures (``register_model_architecture`` functions): an
option keeps the value that the command line or the checkpoint gave it and otherwise gets
the architecture's."""
from __future__ import annotations

from fairseq.utils import safe_getattr


def set_defaults(args, **defaults) -> None:
    """``args.<name> = value`` for every option in ``defaults`` that is unset (absent or None)."""
    for name, value in defaults.items():
        if safe_getattr(args, name, None) is None:
            setattr(args, name, value)


def set_sizes(args, *, layers: int, embed_dim: int, ffn_embed_dim: int, attention_heads: int,
              sides: tuple[str, ...] = ("encoder", "decoder")) -> None:
    """Default sizes of the Transformer stacks named in ``sides``."""
    for side in sides:
        set_defaults(args, **{f"{side}_layers": layers, f"{side}_embed_dim": embed_dim,
                              f"{side}_ffn_embed_dim": ffn_embed_dim, f"{side}_attention_heads": attention_heads})

"""Checkpoints of the plugin's models: safe loading, the checks before a model is built, safe
saving and resuming, and starting a model from another checkpoint; imports change nothing."""

from fairseq_ext.checkpoints.loading import (
    SAFE_CHECKPOINT_GLOBALS,
    export_weights,
    pickled_globals,
    safe_load,
    unsafe_globals,
)

__all__ = [
    "SAFE_CHECKPOINT_GLOBALS",
    "export_weights",
    "pickled_globals",
    "safe_load",
    "unsafe_globals",
]

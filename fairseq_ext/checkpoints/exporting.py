"""A weights-only copy of a checkpoint (``python -m fairseq_ext.checkpoints export``)."""

from __future__ import annotations

import argparse

import torch

from fairseq_ext.checkpoints.dictionaries import RECORD_KEY, recorded_dictionaries
from fairseq_ext.checkpoints.loading import safe_load
from fairseq_ext.fairseq_changes.output_files import exclusive_output


def export_weights(src: str, dst: str, fp16: bool = False) -> None:
    """Write the model weights, config and dictionaries of ``checkpoint`` (no optimizer state),
    loadable by ``fairseq-generate --path`` and ``fairseq-train --finetune-from-model``."""
    state = safe_load(src)
    model = {
        k: (v.half() if fp16 and v.is_floating_point() else v) for k, v in state["model"].items()
    }
    cfg = state.get("cfg")
    if cfg is not None:  # where this checkpoint was initialised from is local history
        for section in (cfg.get("model"), cfg.get("task")):
            for key in ("init_encoder_from", "init_decoder_from"):
                if isinstance(section, argparse.Namespace) and hasattr(section, key):
                    setattr(section, key, None)
                elif isinstance(section, dict) and key in section:
                    section[key] = None
    history = state.get("optimizer_history", [])[-1:]
    # No metrics (numpy arrays) and no previous_training_time: a run that starts from this
    # file must not count the pre-training time against its own --stop-time-hours.
    extra = {
        "train_iterator": {"version": 2, "epoch": 1, "iterations_in_epoch": 0, "shuffle": True}
    }
    out = {
        "args": state.get("args"),
        "cfg": cfg,
        "model": model,
        "optimizer_history": history,
        "extra_state": extra,
    }
    recorded = recorded_dictionaries(state)
    if recorded:  # written where fairseq keeps a task's state
        out["task_state"] = {RECORD_KEY: recorded}
    with exclusive_output(dst, "wb", option="output path") as f:  # no half file, no second writer
        torch.save(out, f)

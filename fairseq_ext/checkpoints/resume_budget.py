"""A resume keeps its budget: a checkpoint at ``--max-update`` (or past ``--max-epoch``) ends
the run with one line and exit status 0."""

from __future__ import annotations

import os

from fairseq_ext.common.errors import note


def _checkpoint_path(cfg, trainer) -> str:
    """The checkpoint fairseq resumed from (by default ``checkpoint_last.pt``)."""
    if cfg.restore_file == "checkpoint_last.pt":
        return os.path.join(cfg.save_dir, f"checkpoint_last{trainer.checkpoint_suffix or ''}.pt")
    return cfg.restore_file


def spent_budget(num_updates: int, next_epoch: int, max_update: int, max_epoch: int) -> str | None:
    """Why a run at ``num_updates`` before epoch ``next_epoch`` has nothing left, or None."""
    if max_update > 0 and num_updates >= max_update:
        return f"is at update {num_updates}, and --max-update is {max_update}"
    if max_epoch > 0 and next_epoch > max_epoch:
        return f"has finished epoch {next_epoch - 1}, and --max-epoch is {max_epoch}"
    return None


def stop_if_spent(cfg, trainer, extra_state, epoch_itr) -> None:
    """End the run (status 0, one line) when its checkpoint has spent its budget."""
    if extra_state is None:
        return
    optimization = trainer.cfg.optimization
    why = spent_budget(
        trainer.get_num_updates(),
        epoch_itr.next_epoch_idx,
        optimization.max_update,
        optimization.max_epoch,
    )
    if why is None:
        return
    if trainer.data_parallel_rank == 0:
        note(
            f"{_checkpoint_path(cfg, trainer)} {why}: nothing to train; the checkpoints in "
            f"{cfg.save_dir} are left as they are (give a larger --max-update or --max-epoch to "
            "train on)"
        )
    raise SystemExit(0)

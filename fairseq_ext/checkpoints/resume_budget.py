"""A resume keeps its budget: a checkpoint already at ``--max-update`` (or past ``--max-epoch``)
is not trained further.

fairseq checks ``--max-update`` only after an update, so resuming a checkpoint at update 2 with
``--max-update 1`` (or running a finished training's command again) trains one more update and
overwrites ``checkpoint_last.pt``; past ``--max-epoch`` it trains nothing, without a word.
``stop_if_spent`` runs once the checkpoint is loaded (``fairseq_changes.checkpoint_saving``):
where the budget is spent, it says so in one line and ends the run with exit status 0 before
anything is trained or written, so that a driver may run a finished training's command again
and find the checkpoint byte for byte as it was.
"""

from __future__ import annotations

import os

from fairseq_ext.common.errors import note


def _checkpoint_path(cfg, trainer) -> str:
    """The checkpoint fairseq resumed from (``--restore-file``, by default ``checkpoint_last.pt`` of
    ``--save-dir``)."""
    if cfg.restore_file == "checkpoint_last.pt":
        return os.path.join(cfg.save_dir, f"checkpoint_last{trainer.checkpoint_suffix or ''}.pt")
    return cfg.restore_file


def spent_budget(num_updates: int, next_epoch: int, max_update: int, max_epoch: int) -> str | None:
    """Why a run resumed at ``num_updates`` updates, about to start epoch ``next_epoch``, has
    nothing left to train (``max_update``/``max_epoch`` 0: no limit); None while it has."""
    if max_update > 0 and num_updates >= max_update:
        return f"is at update {num_updates}, and --max-update is {max_update}"
    if max_epoch > 0 and next_epoch > max_epoch:
        return f"has finished epoch {next_epoch - 1}, and --max-epoch is {max_epoch}"
    return None


def stop_if_spent(cfg, trainer, extra_state, epoch_itr) -> None:
    """End the run (exit status 0, one line from the first rank) when the checkpoint it resumed
    from (``extra_state`` not None) has spent ``--max-update`` or ``--max-epoch``."""
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
            f"{_checkpoint_path(cfg, trainer)} {why}: nothing to train; the checkpoints in {cfg.save_dir} are left "
            "as they are (give a larger --max-update or --max-epoch to train on)"
        )
    raise SystemExit(0)

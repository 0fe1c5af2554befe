"""The ``save-on-ctrl-c`` row: the first Ctrl-C in fairseq-train ends the update under way, saves
``checkpoint_last.pt`` and says how to resume; a second Ctrl-C stops at once, as fairseq did. The
``ctrl-c-in-workers`` row: a DataLoader worker leaves Ctrl-C to the main process."""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading

_requested = threading.Event()  # the first Ctrl-C came: stop where --max-update would


def _first_ctrl_c(signum, frame) -> None:
    _requested.set()
    signal.signal(signal.SIGINT, signal.default_int_handler)  # the second is Python's
    sys.stderr.write(
        "\nCtrl-C: stopping after this update and saving checkpoint_last.pt "
        "(Ctrl-C again stops at once, saving nothing)\n"
    )
    sys.stderr.flush()


def saving_on_ctrl_c(original):
    """``fairseq_cli.train.validate_and_save``, called after every update: once SIGINT came (caught
    in the main thread of a training of one process), save ``checkpoint_last.pt`` as fairseq does
    mid-epoch, say how to resume, and raise ``KeyboardInterrupt`` (status 130)."""
    from fairseq import checkpoint_utils

    def validate_and_save(cfg, trainer, task, epoch_itr, valid_subsets, end_of_epoch):
        if (
            cfg.distributed_training.distributed_world_size == 1
            and threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler
            and not _requested.is_set()
        ):
            signal.signal(signal.SIGINT, _first_ctrl_c)
        if not _requested.is_set():
            valid_losses, should_stop = original(
                cfg, trainer, task, epoch_itr, valid_subsets, end_of_epoch
            )
            if should_stop and signal.getsignal(signal.SIGINT) is _first_ctrl_c:
                signal.signal(signal.SIGINT, signal.default_int_handler)
            if should_stop or not _requested.is_set():
                return valid_losses, should_stop
        saved = checkpoint_utils.save_checkpoint(cfg.checkpoint, trainer, epoch_itr, None)
        last = os.path.join(cfg.checkpoint.save_dir, "checkpoint_last.pt")
        if saved is None and not cfg.checkpoint.no_save and os.path.isfile(last):
            saved = last  # fairseq releases whose save_checkpoint returns nothing
        said = f"interrupted by Ctrl-C after update {trainer.get_num_updates()}: " + (
            f"saved {saved}; the same command resumes from it"
            if saved is not None
            else "nothing saved (--no-save)"
        )
        sys.stderr.write(f"fairseq-train: {said}\n")
        raise KeyboardInterrupt

    return validate_and_save


class _IgnoringCtrlC:
    """A DataLoader's ``worker_init_fn``: SIGINT ignored in the worker, then ``then``'s. Ctrl-C
    reaches the whole process group; the main process stops its workers itself."""

    def __init__(self, then):
        self.then = then

    def __call__(self, worker_id: int) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if self.then is not None:
            self.then(worker_id)


def ignoring_ctrl_c_in_workers(init):
    """``torch.utils.data.DataLoader.__init__`` with ``_IgnoringCtrlC`` before its
    ``worker_init_fn``."""

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.worker_init_fn = _IgnoringCtrlC(self.worker_init_fn)

    return __init__

"""``fairseq-train`` exactly as the CLI runs it, plus one thing for the reliability tests: after
each epoch every rank writes its own parameters to ``$DUMP_PARAMS.rank<R>`` (fairseq itself
saves checkpoints on rank 0 only).

    DUMP_PARAMS=/tmp/params python tests/helpers/train_and_dump.py DATA --user-dir ...
    (fairseq-train args)
"""

import os

import torch
from fairseq_cli import train as fairseq_train

_train_one_epoch = fairseq_train.train


def _train_and_dump(cfg, trainer, task, epoch_itr):
    result = _train_one_epoch(cfg, trainer, task, epoch_itr)
    state = {k: v.detach().cpu().clone() for k, v in trainer.get_model().state_dict().items()}
    torch.save(
        {"num_updates": trainer.get_num_updates(), "model": state},
        f"{os.environ['DUMP_PARAMS']}.rank{trainer.data_parallel_rank}",
    )
    return result


if __name__ == "__main__":
    fairseq_train.train = _train_and_dump
    fairseq_train.cli_main()

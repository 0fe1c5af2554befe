"""fairseq's ``FairseqTask.train_step`` with ``torch.amp.autocast("cuda", ...)`` for fairseq 0.12's
deprecated ``torch.cuda.amp.autocast`` (a ``FutureWarning`` per training on torch >= 2.4)."""

from __future__ import annotations

import torch
from fairseq.optim.amp_optimizer import AMPOptimizer


def train_step(sample, model, criterion, optimizer, update_num, ignore_grad=False):
    """``FairseqTask.train_step``'s body; a plugin task whose step is fairseq's returns it from its
    own."""
    model.train()
    model.set_num_updates(update_num)
    with torch.autograd.profiler.record_function("forward"):
        with torch.amp.autocast("cuda", enabled=isinstance(optimizer, AMPOptimizer)):
            loss, sample_size, logging_output = criterion(model, sample)
    if ignore_grad:
        loss *= 0
    with torch.autograd.profiler.record_function("backward"):
        optimizer.backward(loss)
    return loss, sample_size, logging_output

"""``amp_train_step.train_step`` is fairseq's ``FairseqTask.train_step`` with torch's current
autocast spelling: on the same model, sample and criterion both give the same loss, sample size,
logging output and gradients, and only fairseq's warns (``torch.cuda.amp.autocast`` is
deprecated)."""

from __future__ import annotations

import copy
import warnings

import torch
from fairseq.models import BaseFairseqModel
from fairseq.tasks import FairseqTask

from fairseq_ext.tasks import amp_train_step


class _Model(BaseFairseqModel):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(6, 3)

    def forward(self, x):
        return self.proj(x)


class _Backward:
    """The one optimizer method ``train_step`` calls (fairseq's ``FairseqOptimizer.backward``)."""

    def backward(self, loss):
        loss.backward()


def _criterion(model, sample):
    loss = torch.nn.functional.cross_entropy(model(sample["x"]), sample["y"], reduction="sum")
    return loss, sample["y"].numel(), {"loss": loss.item()}


def _step(train_step, model, sample, ignore_grad=False):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = train_step(
            sample, model, _criterion, _Backward(), update_num=3, ignore_grad=ignore_grad
        )
    return (
        out,
        [p.grad.clone() for p in model.parameters()],
        [w for w in caught if "autocast" in str(w.message)],
    )


def test_the_step_is_fairseqs_without_its_deprecation_warning():
    torch.manual_seed(0)
    sample = {"x": torch.randn(8, 6), "y": torch.randint(0, 3, (8,))}
    for ignore_grad in (False, True):
        ours_model = _Model()
        theirs_model = copy.deepcopy(ours_model)
        (loss, size, log), grads, ours_warned = _step(
            amp_train_step.train_step, ours_model, sample, ignore_grad
        )
        (f_loss, f_size, f_log), f_grads, theirs_warned = _step(
            lambda *a, **k: FairseqTask.train_step(None, *a, **k), theirs_model, sample, ignore_grad
        )
        assert torch.equal(loss, f_loss) and size == f_size and log == f_log
        assert all(torch.equal(a, b) for a, b in zip(grads, f_grads))
        assert ours_model.training and (grads[0].abs().sum().item() == 0) == ignore_grad
        assert not ours_warned and theirs_warned

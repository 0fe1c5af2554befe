"""``PluginTask``: the hooks every task of the plugin shares, each stated once; a task is
``class T(PluginTask, <fairseq's task>)`` plus what its own file shows."""

from __future__ import annotations

import argparse

from fairseq.tasks import FairseqTask

from fairseq_ext.checkpoints.dictionaries import with_dictionaries
from fairseq_ext.common.tokenizer_check import checked_bpe
from fairseq_ext.data import complete_batches
from fairseq_ext.fairseq_changes.quiet import VERBOSE_HELP
from fairseq_ext.tasks import amp_train_step


class PluginTask:
    """Placed before fairseq's task among the bases, so each hook adds to fairseq's own."""

    @classmethod
    def add_args(cls, parser):
        """fairseq's options of the task, and ``--verbose`` (``fairseq_changes.quiet``)."""
        super().add_args(parser)
        try:
            parser.add_argument("--verbose", action="store_true", help=VERBOSE_HELP)
        except argparse.ArgumentError:  # added by an earlier pass of fairseq's parser
            pass

    def state_dict(self):
        """The checkpoint's ``task_state``, with the dictionaries (``checkpoints.dictionaries``)."""
        return with_dictionaries(super().state_dict(), self)

    def build_bpe(self, args):
        """``--bpe``, a sentencepiece model checked against the source dictionary."""
        dictionary = f"the source dictionary in {self.cfg.data}"
        return checked_bpe(super().build_bpe, args, self.source_dictionary, dictionary)

    def get_batch_iterator(self, dataset, **options):
        """Every example in a batch, an oversized one refused (``data.complete_batches``)."""
        return super().get_batch_iterator(complete_batches(dataset, options), **options)

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        """fairseq's step with torch's current autocast (``amp_train_step``); a parent's own step
        (``translation_lev``'s) is kept."""
        step = super().train_step
        if step.__func__ is FairseqTask.train_step:
            step = amp_train_step.train_step
        return step(sample, model, criterion, optimizer, update_num, ignore_grad)

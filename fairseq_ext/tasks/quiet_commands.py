"""The plugin's tasks keep their commands quiet (``fairseq_ext.quiet``), decided by the task at
hand through the two hooks fairseq calls on the task class a command runs.

* ``add_args``: fairseq's ``parse_args_and_arch`` asks the command's ``--task`` for its options
  before it builds the configuration (where Hydra warns) and logs it; the task adds
  ``--verbose`` and quiets the rest of the command unless it is given. fairseq also calls
  ``add_args`` of every task of a ``--user-dir`` when it imports it, with an argument group
  of a parser for its documentation: that call is no command's, and changes nothing.
* ``setup_task``: the same for a task set up without fairseq's option parser
  (``fairseq-hydra-train``, Python code); ``FAIRSEQ_EXT_VERBOSE=1`` keeps everything there.

A command of fairseq's own tasks reaches neither, and prints what it prints without the plugin."""
from __future__ import annotations

import argparse

from fairseq_ext import quiet


class QuietCommands:
    """Mixed in before the fairseq task class a plugin task subclasses."""

    @classmethod
    def add_args(cls, parser):
        super().add_args(parser)
        if isinstance(parser, argparse.ArgumentParser):
            quiet.quiet_plugin_command(parser)

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        quiet.hush(verbose=quiet.verbose_asked())
        return super().setup_task(cfg, **kwargs)

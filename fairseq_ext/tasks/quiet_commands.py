"""The plugin's tasks keep their commands quiet (``fairseq_ext.fairseq_changes.quiet``), decided by the task at
hand through the two hooks fairseq calls on the task class a command runs; each task calls these
from its own ``add_args`` and ``setup_task``.

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

from fairseq_ext.fairseq_changes import quiet


def add_verbose(parser) -> None:
    """From a plugin task's ``add_args``: ``--verbose``, and the command quiet unless it is given
    (nothing for the argument group fairseq builds its documentation with)."""
    if isinstance(parser, argparse.ArgumentParser):
        quiet.quiet_plugin_command(parser)


def at_setup() -> None:
    """From a plugin task's ``setup_task``: quiet unless ``--verbose`` or ``FAIRSEQ_EXT_VERBOSE=1``."""
    quiet.hush(verbose=quiet.verbose_asked())

"""Loading the plugin into fairseq: registration and the safety patches, in one call.

``load()`` registers every task, model, architecture and criterion of the plugin with
fairseq, makes fairseq's checkpoint loader safe (``checkpoints.install``: weights-only loads
with an exact allow-list, clear errors for corrupt files, atomic checkpoint copies) and makes
the plugin's input errors print as one line on the command line
(``errors.install_cli_excepthook``). It is idempotent.

Who calls it:

* fairseq's command-line tools, through ``--user-dir fairseq_ext``: fairseq
  (``fairseq/utils.py: import_user_module``) imports the package ``fairseq_ext``, which
  imports nothing, then every module of ``fairseq_ext/tasks`` and ``fairseq_ext/models``;
  ``fairseq_ext/tasks/__init__.py`` calls ``load()``;
* Python code that drives fairseq in process (tests, benchmarks, notebooks) calls it once,
  before parsing fairseq options or building a task: ``fairseq_ext.plugin.load()``. fairseq
  skips a ``--user-dir`` whose module is already imported, so after
  ``import fairseq_ext.masking`` only this call registers the plugin.

Nothing else in the package changes fairseq: ``import fairseq_ext.masking`` imports torch only.
"""
from __future__ import annotations


def load() -> None:
    """Install the safety patches, then register the plugin's tasks, models and criteria."""
    from fairseq_ext import checkpoints, errors

    checkpoints.install()
    errors.install_cli_excepthook()
    from fairseq_ext import criterions, models, tasks  # noqa: F401  (register_* run on import)

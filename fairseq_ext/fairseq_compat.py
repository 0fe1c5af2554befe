"""What the plugin changes in fairseq 0.12 so that it runs safely on current torch, in one call.

``install()`` makes these changes, each idempotent and each kept to the plugin's purpose:

1. loading (``fairseq_ext.checkpoints``): ``checkpoint_utils.load_checkpoint_to_cpu`` loads
   weights-only (torch's safe unpickler) with an exact allow-list of the classes fairseq's
   checkpoints pickle; a foreign, corrupt, truncated or non-finite file is one line; a
   checkpoint is compared with the task it is loaded for (its dictionaries, symbols in order);
2. saving (``fairseq_ext.checkpoint_saving``): ``PathManager.copy`` copies a checkpoint to a
   temporary name and renames it, leftovers of killed saves are removed, a missing
   ``checkpoint_last.pt`` resumes from the newest complete checkpoint, a full disk is one line
   naming the last good checkpoint;
3. ``fairseq-generate --results-path`` (``fairseq_ext.output_files``): one writer per file,
   moved into place complete;
4. ``fairseq-interactive`` (``fairseq_ext.data.interactive_input``): its input is read as
   bytes and decoded line by line, so text that is not UTF-8 is named by file and line;
5. ``fairseq-generate``/``-interactive`` ``--model-overrides`` (``fairseq_ext.model_overrides``):
   text that is no Python literal dict is one line, not a traceback from ``ast.literal_eval``;
6. ``sys.excepthook`` prints the plugin's own input errors (``FairseqExtError``) as one line;
   every other exception keeps Python's report;
7. ``--help`` (``fairseq_ext.cli_help``): printed after the options of ``--task``, ``--arch``
   and ``--criterion`` are added, so it lists them.

Loading the plugin (``--user-dir fairseq_ext`` or ``fairseq_ext.plugin.load()``) calls it once,
where the tasks register."""
from __future__ import annotations

from fairseq_ext import checkpoints, cli_help, errors, model_overrides, output_files
from fairseq_ext.data import interactive_input


def install() -> None:
    """Apply the changes above (a second call changes nothing)."""
    checkpoints.install()
    output_files.install()
    interactive_input.install()
    model_overrides.install()
    errors.install_cli_excepthook()
    cli_help.install()

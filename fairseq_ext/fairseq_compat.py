"""What the plugin changes in fairseq 0.12 so that it runs safely on current torch, in one call.

``install()`` makes three changes, each idempotent and each kept to the plugin's purpose:

1. ``fairseq.checkpoint_utils.load_checkpoint_to_cpu`` loads weights-only (torch's safe
   unpickler) with an exact allow-list of the classes fairseq's checkpoints pickle, and answers
   a foreign, corrupt or truncated file with one line (``fairseq_ext.checkpoints``);
2. ``fairseq.file_io.PathManager.copy`` copies a checkpoint to a temporary name and renames it,
   so a job killed while fairseq copies ``checkpoint_last.pt`` never leaves a truncated one;
3. ``sys.excepthook`` prints the plugin's own input errors (``FairseqExtError``) as one line;
   every other exception keeps Python's report.

Loading the plugin (``--user-dir fairseq_ext`` or ``fairseq_ext.plugin.load()``) calls it once,
where the tasks register."""
from __future__ import annotations

from fairseq_ext import checkpoints, errors


def install() -> None:
    """Apply the three changes above (a second call changes nothing)."""
    checkpoints.install()
    errors.install_cli_excepthook()

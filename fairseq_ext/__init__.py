"""fairseq_ext: four masking techniques as a fairseq plugin (``--user-dir fairseq_ext``).

Importing the package registers every task, model, architecture and criterion, makes
fairseq's checkpoint loader safe (``checkpoints.install``) and makes the plugin's input
errors print as one line on the command line (``errors.install_cli_excepthook``).
"""
from fairseq_ext import checkpoints, errors

checkpoints.install()
errors.install_cli_excepthook()

from fairseq_ext import criterions, models, tasks  # noqa: E402  (registration after install)

__version__ = "0.1.0"
__all__ = ["checkpoints", "criterions", "errors", "models", "tasks"]

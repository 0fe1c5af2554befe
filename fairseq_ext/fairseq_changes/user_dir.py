"""A ``--user-dir`` that names a folder of this repository other than the plugin.

fairseq imports the folder that ``--user-dir`` names as a module. ``examples/`` then registers
nothing, and fairseq's option parser blames the task: ``argument --task: invalid choice:
'cmlm_hybrid'``. ``examples/__init__.py`` calls ``refuse_as_user_dir`` instead, where the command
line's ``--user-dir`` names that folder: one line naming it and the folder that holds the plugin.
A folder without an ``__init__.py``, the repository root among them, is imported as an empty
namespace package: nothing of the plugin runs, and fairseq's own answer stands.
"""

from __future__ import annotations

from pathlib import Path

from fairseq_ext.common.errors import FairseqExtError, install_cli_excepthook

PLUGIN_DIR = Path(__file__).resolve().parent.parent


def refuse_as_user_dir(folder: str) -> None:
    """Stop the fairseq command whose ``--user-dir`` is ``folder`` with one line; the plugin's
    excepthook is installed first, since nothing of the plugin is loaded yet."""
    install_cli_excepthook()
    raise FairseqExtError(
        f"--user-dir {folder} holds no fairseq plugin: it registers no task, model or criterion "
        f"(so --task would be refused as an invalid choice); the plugin is {PLUGIN_DIR}: give "
        f"--user-dir {PLUGIN_DIR}"
    )

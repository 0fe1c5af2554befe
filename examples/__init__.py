"""Not a Python package: the user scripts of each technique. Where fairseq's ``--user-dir`` names
this folder, which holds no plugin, importing it stops the command with one line naming the
folder that does (``fairseq_ext.fairseq_changes.user_dir``). Anywhere else it does nothing and
imports nothing: fairseq itself imports ``examples`` where the repository root is on ``sys.path``
(it looks for ``examples.simultaneous_translation``), and a ``fairseq_ext`` imported then would make
fairseq take a later ``--user-dir fairseq_ext`` as loaded already."""

import os
import sys

_HERE = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))
_ARGS = sys.argv[1:]
_USER_DIRS = [value for option, value in zip(_ARGS, _ARGS[1:]) if option == "--user-dir"] + [
    arg.split("=", 1)[1] for arg in _ARGS if arg.startswith("--user-dir=")
]
if any(os.path.realpath(os.path.abspath(folder)) == _HERE for folder in _USER_DIRS):
    from fairseq_ext.fairseq_changes.user_dir import refuse_as_user_dir

    refuse_as_user_dir(_HERE)

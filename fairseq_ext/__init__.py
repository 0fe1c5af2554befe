"""fairseq_ext: four masking techniques as a fairseq plugin (``--user-dir fairseq_ext``).

Importing the package, or ``fairseq_ext.masking`` (the masks of the four papers, torch only),
does not import fairseq and registers nothing. fairseq's tools load the plugin through
``--user-dir fairseq_ext``, in any import order (``fairseq_ext.plugin.load_on_user_dir``);
Python code calls ``fairseq_ext.plugin.load()`` or uses ``fairseq_ext.hub``.
"""

from fairseq_ext import plugin as _plugin

__version__ = "0.2.0"

_plugin.load_on_user_dir()

"""fairseq_ext: four masking techniques as a fairseq plugin (``--user-dir fairseq_ext``).

Importing the package, or ``fairseq_ext.masking`` (the masks of the four papers, torch only),
does not import fairseq and registers nothing. fairseq's tools load the plugin through
``--user-dir fairseq_ext``, in any import order (the ``user-dir`` row of ``fairseq_changes``);
Python code calls ``fairseq_ext.plugin.load()`` or uses ``fairseq_ext.hub``.
"""

from fairseq_ext import fairseq_changes as _fairseq_changes

__version__ = "0.2.0"

_fairseq_changes.install_at_import()

"""fairseq_ext: four masking techniques as a fairseq plugin (``--user-dir fairseq_ext``).

Importing the package, or ``fairseq_ext.masking`` (the masks of the four papers, torch only),
does not import fairseq. fairseq's tools load the plugin through ``--user-dir fairseq_ext``;
Python code calls ``fairseq_ext.plugin.load()`` or uses ``fairseq_ext.hub``.
"""
__version__ = "0.2.0"

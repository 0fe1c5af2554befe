"""The data scripts (``data_prep/``), installed with the plugin as ``fairseq_ext.data_prep``."""

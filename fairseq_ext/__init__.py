"""fairseq_ext: four masking techniques as a fairseq plugin (``--user-dir fairseq_ext``).

Importing the package, or ``fairseq_ext.masking`` (the masks of the four papers, torch only),
changes nothing in fairseq and does not import it. The plugin is loaded explicitly:

* on the command line, ``fairseq-train/-generate/-interactive --user-dir fairseq_ext`` loads
  it (fairseq imports ``fairseq_ext.tasks``, which calls ``plugin.load()``);
* in Python, call ``fairseq_ext.plugin.load()`` once before parsing fairseq options or
  building a task: it registers every task, model, architecture and criterion and installs
  the safety patches (see ``fairseq_ext.plugin``).
"""
__version__ = "0.1.0"

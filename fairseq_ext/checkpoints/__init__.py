"""Checkpoints of the plugin's models: one module per job.

* ``loading``: ``safe_load``, torch's weights-only loading with the exact allow-list of
  ``allow_list`` (which also lists what a file pickles: ``pickled_globals``, ``unsafe_globals``);
* ``checks``, ``overrides``, ``families``, ``dictionaries``, ``shapes``: what a checkpoint must
  satisfy before a model is built from it;
* ``saving``: saving without losing work to a kill or a full disk (applied by
  ``fairseq_changes.checkpoint_saving``); ``save_dir_lock``: one training per ``--save-dir``;
  ``resume_budget``: a resume trains no further than its budget; ``resuming``: what a training
  starts from is there, and a resume has the model options it was trained with;
* ``starting``: a new model started from the weights of another checkpoint;
* ``exporting``: ``export_weights``, a weights-only copy; ``converted``: a converted model
  written as a fairseq checkpoint;
* ``python -m fairseq_ext.checkpoints inspect|export`` (``__main__``).

Importing this package changes nothing in fairseq.
"""

from fairseq_ext.checkpoints.allow_list import (
    SAFE_CHECKPOINT_GLOBALS,
    pickled_globals,
    unsafe_globals,
)
from fairseq_ext.checkpoints.exporting import export_weights
from fairseq_ext.checkpoints.loading import safe_load

__all__ = [
    "SAFE_CHECKPOINT_GLOBALS",
    "export_weights",
    "pickled_globals",
    "safe_load",
    "unsafe_globals",
]

"""fairseq task adapters (``register_task``)."""
from fairseq_ext.tasks import cmlm_hybrid  # noqa: F401

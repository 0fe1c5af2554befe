"""fairseq task adapters (``register_task``)."""
from fairseq_ext.tasks import cmlm_hybrid, position_masked_lm  # noqa: F401

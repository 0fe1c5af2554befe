"""fairseq model adapters (``register_model`` / ``register_model_architecture``)."""
from fairseq_ext.models import hi_cmlm_transformer, position_masked_roberta  # noqa: F401

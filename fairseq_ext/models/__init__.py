"""fairseq model adapters (``register_model`` / ``register_model_architecture``)."""
from fairseq_ext.models import hi_cmlm_transformer  # noqa: F401
from fairseq_ext.models import prophetnet  # noqa: F401
from fairseq_ext.models import unilm_transformer  # noqa: F401

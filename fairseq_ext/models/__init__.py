"""fairseq model adapters (``register_model`` / ``register_model_architecture``)."""

from fairseq_ext.models import (  # noqa: F401
    hi_cmlm_transformer,
    position_masked_roberta,
    prophetnet,
    unilm_transformer,
)

"""fairseq task adapters (``register_task``)."""
from fairseq_ext.tasks import (  # noqa: F401
    cmlm_hybrid,
    permutation_lm,
    position_masked_lm,
    prophetnet_denoising,
    translation_prophetnet,
    unilm_seq2seq,
)

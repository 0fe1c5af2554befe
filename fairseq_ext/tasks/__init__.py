"""fairseq task adapters (``register_task``)."""
from fairseq_ext.tasks import cmlm_hybrid  # noqa: F401
from fairseq_ext.tasks import prophetnet_denoising, translation_prophetnet  # noqa: F401
from fairseq_ext.tasks import permutation_lm, unilm_seq2seq  # noqa: F401

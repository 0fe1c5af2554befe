"""The plugin's tasks (``register_task``), criteria and ``--bpe wordpiece``; importing this package
(``--user-dir fairseq_ext``, ``plugin.load()``) registers them and applies
``fairseq_changes.install()``."""

from fairseq_ext import fairseq_changes

fairseq_changes.install()

from fairseq_ext import criterions  # noqa: E402,F401  (register_criterion runs on import)
from fairseq_ext.tasks import (  # noqa: E402,F401
    cmlm_hybrid,
    permutation_lm,
    position_masked_lm,
    prophetnet_denoising,
    translation_prophetnet,
    unilm_seq2seq,
)
from fairseq_ext.wordpiece import bpe  # noqa: E402,F401  (--bpe wordpiece)

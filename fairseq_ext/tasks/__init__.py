"""fairseq task adapters (``register_task``), the criteria they train with and ``--bpe wordpiece``.

fairseq's ``--user-dir fairseq_ext`` imports this package and ``fairseq_ext.models``
(``fairseq/utils.py: import_user_module``); ``fairseq_ext.plugin.load()`` does the same from
Python. Registration also applies the table of ``fairseq_changes`` (``install()``: what the plugin
changes in fairseq, for whom, and how to turn each change off).
"""

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

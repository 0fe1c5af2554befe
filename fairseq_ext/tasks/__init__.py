"""fairseq task adapters (``register_task``).

fairseq's ``--user-dir fairseq_ext`` imports this package (``fairseq/utils.py:
import_user_module`` imports ``<user dir>/tasks`` and ``<user dir>/models``), so this is
where the command-line tools load the plugin: ``plugin.load()`` registers the tasks, models
and criteria and installs the safety patches.
"""
from fairseq_ext import plugin
from fairseq_ext.tasks import (  # noqa: F401
    cmlm_hybrid,
    permutation_lm,
    position_masked_lm,
    prophetnet_denoising,
    translation_prophetnet,
    unilm_seq2seq,
)

plugin.load()

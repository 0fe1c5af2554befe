"""RoBERTa's ``<mask>`` symbol, added last to a dictionary as fairseq's ``masked_lm`` adds it
(Liu et al. 2019), so that the vocabulary rows of a task match a RoBERTa checkpoint (Su 2019's
start for UniLM) or a ProphetNet pre-training run (Qi et al. 2020, section 2.4, span masking)."""

from fairseq.data import Dictionary

from fairseq_ext.data.size_checks import refuse_missing_dictionary

MASK_SYMBOL = "<mask>"


def load_with_mask_symbol(path: str) -> Dictionary:
    """The dictionary ``path`` (a ``dict.txt``) with ``<mask>`` added unless it has it."""
    refuse_missing_dictionary(path)
    dictionary = Dictionary.load(path)
    dictionary.add_symbol(MASK_SYMBOL)
    return dictionary

"""Monolingual tasks read their input and their target with one dictionary."""
from fairseq.data import Dictionary


class OneDictionaryTaskMixin:
    """Mix into a ``FairseqTask`` that keeps its dictionary in ``self.dictionary``
    (``permutation_lm``, ``prophetnet_denoising``): it is the source and the target dictionary."""

    dictionary: Dictionary

    @property
    def source_dictionary(self) -> Dictionary:
        return self.dictionary

    @property
    def target_dictionary(self) -> Dictionary:
        return self.dictionary

"""fairseq criterion adapters (``register_criterion``). HI-CMLM trains with fairseq's own
``nat_loss``, UniLM with fairseq's cross-entropy criteria."""

from fairseq_ext.criterions import ngram_language_loss, position_masked_lm  # noqa: F401

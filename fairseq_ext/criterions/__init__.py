"""fairseq criterion adapters (``register_criterion``). HI-CMLM trains with fairseq's own
``nat_loss``; the other techniques' criteria live here."""
from fairseq_ext.criterions import position_masked_lm  # noqa: F401

"""Generators that the plugin's tasks build for fairseq-generate and fairseq-interactive."""

from fairseq_ext.generation.finite_scores import (  # noqa: F401
    FiniteScoresSequenceGenerator,
    UniLMSequenceGenerator,
)
from fairseq_ext.generation.refinement import MaskPredictGenerator  # noqa: F401

"""Generators that the plugin's tasks build for fairseq-generate and fairseq-interactive."""

from fairseq_ext.generation.finite_scores import FiniteScoresSequenceGenerator
from fairseq_ext.generation.refinement import MaskPredictGenerator
from fairseq_ext.generation.unilm_beam import UniLMSequenceGenerator

__all__ = ["FiniteScoresSequenceGenerator", "MaskPredictGenerator", "UniLMSequenceGenerator"]

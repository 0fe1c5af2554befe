"""Dataset-side code shared by the tasks of the plugin: batching that keeps every example
(``complete_batches``), the checks of binarized splits (``size_checks``) and of interactive input
(``interactive_input``), and the position-masking datasets."""

# ruff: noqa: F401  (the names this package exports)

from fairseq_ext.data.complete_batches import CompleteBatchesDataset, complete_batches
from fairseq_ext.data.position_masking_dataset import (
    NO_POSITION_LABEL,
    POSITION_MASK_SOURCES,
    PositionMaskingDataset,
)

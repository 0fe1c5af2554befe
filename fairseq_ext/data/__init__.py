"""Dataset-side code shared by the tasks of the plugin."""
from fairseq_ext.data.complete_batches import CompleteBatchesDataset, CompleteBatchesTaskMixin
from fairseq_ext.data.position_masking_dataset import (
    NO_POSITION_LABEL,
    POSITION_MASK_SOURCES,
    FieldDataset,
    PositionMaskingDataset,
)

__all__ = [
    "CompleteBatchesDataset",
    "CompleteBatchesTaskMixin",
    "FieldDataset",
    "NO_POSITION_LABEL",
    "POSITION_MASK_SOURCES",
    "PositionMaskingDataset",
]

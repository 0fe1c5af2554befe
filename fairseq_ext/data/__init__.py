"""Dataset-side fixes shared by every task of the plugin."""
from fairseq_ext.data.complete_batches import CompleteBatchesDataset, CompleteBatchesTaskMixin

__all__ = ["CompleteBatchesDataset", "CompleteBatchesTaskMixin"]

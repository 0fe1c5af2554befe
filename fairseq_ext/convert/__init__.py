"""Weights in and out of the plugin's models (``python -m fairseq_ext.convert``): BERT-family and
ProphetNet checkpoints of transformers; the mapping is in docs/pretrained.md."""

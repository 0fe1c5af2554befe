"""The Python API in fairseq's hub style (docs/python-api.md):

    from fairseq_ext import hub
    model = hub.from_pretrained("hi-cmlm-multi30k-en-de")  # the quickstart's HI-CMLM, shipped
    model.translate(["A man is riding a bike."])  # 10 passes, length beam 3 unless given

Importing this package imports neither fairseq nor the plugin."""

from __future__ import annotations


def from_pretrained(
    model_dir, checkpoint_file=None, data_name_or_path=".", device=None, **overrides
):
    """The model of ``model_dir`` (a folder, or a shipped model's name) behind the interface of
    its family; see ``fairseq_ext.hub.loading.from_pretrained``."""
    from fairseq_ext.hub.loading import from_pretrained as load

    return load(model_dir, checkpoint_file, data_name_or_path, device, **overrides)

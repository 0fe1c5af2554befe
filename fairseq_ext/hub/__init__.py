"""The Python API: load a model folder and translate, summarise, fill masks or classify, in
fairseq's hub style (``fairseq.hub_utils``; docs/python-api.md).

    from fairseq_ext import hub
    model = hub.from_pretrained("hi-cmlm-multi30k-en-de")  # the quickstart's HI-CMLM, shipped
    model.translate(["A man is riding a bike."])  # 10 passes, length beam 3 unless given

One interface per family, each a subclass of fairseq's own:

* HI-CMLM (Wang et al. 2021, task ``cmlm_hybrid``): ``translate`` with mask-predict's passes,
  length beam and hybrid strategy (``fairseq_ext.hub.generation.HICMLMHubInterface``);
* ProphetNet (Qi et al. 2020) and UniLM (Su 2019, prefix mask): ``summarize`` / ``translate``
  with beam search, and fairseq's ``generate`` on token ids (``Seq2SeqHubInterface``);
* the position-masked encoder (Wagner et al. 2020): ``fill_mask`` and ``classify``
  (``fairseq_ext.hub.encoder.PositionMaskedHubInterface``).

Every method returns one output per input, in input order; empty, over-long, mistyped and
unknown input is handled as ``fairseq_ext.hub.inputs`` says.

Importing this package imports neither fairseq nor the plugin; ``from_pretrained`` loads both
(``fairseq_ext.plugin.load``).
"""

from __future__ import annotations


def from_pretrained(
    model_dir, checkpoint_file=None, data_name_or_path=".", device=None, **overrides
):
    """The model of ``model_dir`` (a folder, or a shipped model's name) behind the interface of
    its family; see ``fairseq_ext.hub.loading.from_pretrained``."""
    from fairseq_ext.hub.loading import from_pretrained as load

    return load(model_dir, checkpoint_file, data_name_or_path, device, **overrides)

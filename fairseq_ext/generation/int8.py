"""int8 weights for decoding on the CPU (``cmlm_hybrid --int8-decoding``): torch's dynamic
quantisation of every ``nn.Linear`` in place (int8 weights, activations quantised per product),
as CTranslate2's ``int8``. Not exact; docs/results/speed.md measures the BLEU change.
"""

from __future__ import annotations

import warnings

import torch

from fairseq_ext.common.errors import require

QUANTIZED = "fairseq_ext_int8"  # set on a model once its Linear layers are int8


def quantize_for_decoding(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` with every ``nn.Linear`` replaced by torch's dynamically quantised int8 one (in
    place; a second call changes nothing). Refused for a model in training mode or on a GPU."""
    if getattr(model, QUANTIZED, False):
        return model
    require(
        not model.training,
        "--int8-decoding is a decoding option (fairseq-generate, fairseq-interactive, the "
        "hub): the model is in training mode here; drop it from fairseq-train",
    )
    require(
        all(p.device.type == "cpu" for p in model.parameters()),
        "--int8-decoding runs on the CPU (torch's dynamic int8 quantisation has no CUDA kernels): "
        "add --cpu, or decode without it on the GPU",
    )
    from fairseq.modules import MultiheadAttention

    # fairseq's attention hands its projection weights to torch's fused attention unless this
    # is set; int8 projections have no weight tensor and run through their own forward instead
    for module in model.modules():
        if isinstance(module, MultiheadAttention):
            module.skip_embed_dim_check = True
    # torch announces the API's move to torchao; it is still torch's own
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        torch.ao.quantization.quantize_dynamic(
            model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True
        )
    setattr(model, QUANTIZED, True)
    return model

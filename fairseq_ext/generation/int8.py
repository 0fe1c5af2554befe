"""int8 weights for decoding on the CPU (``cmlm_hybrid --int8-decoding``): torch's dynamic
quantisation of every ``nn.Linear`` in place (int8 weights, activations quantised per product),
as CTranslate2's ``int8``, packed for the fastest of torch's int8 engines on this CPU
(``packing_engine``). Not exact; docs/results/speed.md measures the BLEU change and the speed.
"""

from __future__ import annotations

import warnings

import torch

from fairseq_ext.common.errors import require

QUANTIZED = "fairseq_ext_int8"  # set on a model once its Linear layers are int8: the engine


def packing_engine() -> str:
    """oneDNN where the CPU has AMX tiles (its int8 matrix products run on them), else torch's
    ``x86`` engine (fbgemm), faster than oneDNN's without AMX (docs/results/speed.md), or the
    engine in force where torch has neither (an ARM build)."""
    engines = torch.backends.quantized.supported_engines
    if getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)() and "onednn" in engines:
        return "onednn"
    return "x86" if "x86" in engines else torch.backends.quantized.engine


def quantize_for_decoding(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` with every ``nn.Linear`` replaced by torch's dynamically quantised int8 one (in
    place; a second call changes nothing), packed for ``packing_engine()``; torch's global
    engine is left as it was (a layer runs the kernels it was packed for, whatever the engine
    when it runs). Refused for a model in training mode or on a GPU."""
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
    engine, before = packing_engine(), torch.backends.quantized.engine
    # torch announces the API's move to torchao; it is still torch's own
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        try:
            torch.backends.quantized.engine = engine
            torch.ao.quantization.quantize_dynamic(
                model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True
            )
        finally:
            torch.backends.quantized.engine = before
    setattr(model, QUANTIZED, engine)
    return model

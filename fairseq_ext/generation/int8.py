"""int8 weights for decoding on the CPU (``cmlm_hybrid --int8-decoding``): torch's dynamic
quantisation of every ``nn.Linear`` in place (int8 weights, activations quantised per product),
as CTranslate2's ``int8``, packed for fbgemm (torch's ``x86`` engine) and, on CPUs with AMX, for
oneDNN as well, each product running on the faster (``SizeDispatchedLinear``). Not exact;
docs/results/speed.md measures the BLEU change and the speed.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager

import torch
from torch.ao.nn.quantized.modules.linear import LinearPackedParams

from fairseq_ext.common.errors import require

QUANTIZED = "fairseq_ext_int8"  # set on a model once its Linear layers are int8: the engines
# the multiply-adds from which a product runs on oneDNN's AMX kernels rather than fbgemm's, whose
# fixed cost a call is lower: 2^26 decoded fastest at batch 1 and 64 of 2^24, 2^26, 2^28
# (docs/results/speed.md)
LARGE_PRODUCT = 1 << 26


@contextmanager
def _engine(name: str):
    """torch's quantized engine ``name`` within the block (it decides how weights are packed)."""
    before = torch.backends.quantized.engine
    try:
        torch.backends.quantized.engine = name
        yield
    finally:
        torch.backends.quantized.engine = before


def has_amx() -> bool:
    """Whether oneDNN can run int8 products on this CPU's AMX tiles."""
    amx = getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)()
    return amx and "onednn" in torch.backends.quantized.supported_engines


def int8_engines() -> str:
    """The engines ``quantize_for_decoding`` packs for on this CPU."""
    return "x86+onednn" if has_amx() else "x86"


class SizeDispatchedLinear(torch.ao.nn.quantized.dynamic.Linear):
    """torch's dynamic int8 ``Linear`` packed for fbgemm and, again, for oneDNN: a product of at
    least ``LARGE_PRODUCT`` multiply-adds runs on oneDNN's AMX kernels, a smaller one on fbgemm's
    (same 7-bit-activation product either way)."""

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        layer = super().from_float(mod, use_precomputed_fake_quant)
        with _engine("onednn"):
            layer.large = LinearPackedParams(dtype=torch.qint8)
            layer.large.set_weight_bias(*layer._packed_params._weight_bias())
        return layer

    def forward(self, x):
        if x.numel() * self.out_features < LARGE_PRODUCT:
            return super().forward(x)
        return torch.ops.quantized.linear_dynamic(x, self.large._packed_params, reduce_range=True)


def quantize_for_decoding(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` with every ``nn.Linear`` replaced by torch's dynamically quantised int8 one (in
    place; a second call changes nothing); torch's global engine is left as it was (a layer runs
    the kernels it was packed for, whatever the engine when it runs). Refused for a model in
    training mode or on a GPU."""
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
    mapping = {torch.nn.Linear: SizeDispatchedLinear} if has_amx() else None
    # torch announces the API's move to torchao; it is still torch's own
    with warnings.catch_warnings(), _engine("x86"):
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        torch.ao.quantization.quantize_dynamic(
            model, {torch.nn.Linear}, dtype=torch.qint8, mapping=mapping, inplace=True
        )
    setattr(model, QUANTIZED, int8_engines())
    return model

"""The keys and values of the encoder output for a decoder's cross-attention, computed once per
sentence and reused by every mask-predict pass (Ghazvininejad et al. 2019, section 3: the
source is encoded once, only the target is re-predicted).

fairseq's NAT decoder calls its layers without an incremental state, so every pass projects the
encoder output again. Here the projections are put into fairseq's own incremental-state buffers
of each ``encoder_attn`` (``prev_key``/``prev_value``, read with ``static_kv``). Computed for the
``B`` sentences, the buffers serve ``B * beam`` length candidates through fairseq's shared-keys
path (``bsz != kv_bsz``), without a copy per candidate.

The state belongs to one decoding: the lean mask-predict loop hands it to each ``encoder_attn``
call itself (``lean_mask_predict.fairseq_extract_features``), so threads sharing a model decode
apart. ``reading_cache`` instead sets forward pre-hooks on the layers for the duration of a
block, which every caller of those layers sees: only for a model that no other thread runs.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator


def cross_attention_cache(layers, encoder_out: dict) -> dict:
    """fairseq incremental state holding each layer's cross-attention keys and values of
    ``encoder_out`` (``(B, heads, S, head_dim)``) and its padding mask."""
    enc = encoder_out["encoder_out"][0]  # S x B x C
    masks = encoder_out["encoder_padding_mask"]
    src_len, bsz, _ = enc.shape
    state: dict = {}
    for layer in layers:
        att = layer.encoder_attn
        k, v = (
            proj(enc)
            .contiguous()
            .view(src_len, bsz * att.num_heads, att.head_dim)
            .transpose(0, 1)
            .view(bsz, att.num_heads, src_len, att.head_dim)
            for proj in (att.k_proj, att.v_proj)
        )
        att._set_input_buffer(
            state,
            {"prev_key": k, "prev_value": v, "prev_key_padding_mask": masks[0] if masks else None},
        )
    return state


@contextmanager
def reading_cache(layers, state: dict | None) -> Iterator[None]:
    """Within the block, each layer's ``encoder_attn`` reads its keys and values from ``state``
    (None: it projects the encoder output itself, as fairseq does); hooks on the shared layers,
    so not while another thread runs them (module docstring)."""
    if state is None:
        yield
        return

    def with_state(module, args, kwargs):
        kwargs["incremental_state"] = state
        return args, kwargs

    hooks = [
        layer.encoder_attn.register_forward_pre_hook(with_state, with_kwargs=True)
        for layer in layers
    ]
    try:
        yield
    finally:
        for hook in hooks:
            hook.remove()

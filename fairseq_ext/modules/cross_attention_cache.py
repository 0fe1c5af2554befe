"""The cross-attention keys and values of the encoder output, computed once for all mask-predict
passes (Ghazvininejad et al. 2019, section 3), in fairseq's incremental-state buffers (read with
``static_kv``; ``B`` sentences serve ``B * beam`` length candidates)."""

from __future__ import annotations


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

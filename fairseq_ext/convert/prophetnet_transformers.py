"""The ``prophetnet`` model and transformers' ``ProphetNetForConditionalGeneration`` (Qi et al.
2020): parameter names, the n-gram rows rolled by one, the config of the same sizes, and the
correction of transformers' predicting-stream relative-position layout (docs/prophetnet.md)."""

from __future__ import annotations

import types
from typing import Dict

import torch
from torch import Tensor

_PROJ = {
    "q_proj": "query_proj",
    "k_proj": "key_proj",
    "v_proj": "value_proj",
    "out_proj": "out_proj",
}
_BLOCK = {
    "self_attn_layer_norm": "self_attn_layer_norm",
    "fc1": "feed_forward.intermediate",
    "fc2": "feed_forward.output",
    "final_layer_norm": "feed_forward_layer_norm",
}
_LAYER_NAMES = {
    "encoder": dict(_BLOCK, **{f"self_attn.{a}": f"self_attn.{b}" for a, b in _PROJ.items()}),
    "decoder": dict(
        _BLOCK,
        **{f"self_attn.{a}": f"self_attn.{b}" for a, b in _PROJ.items()},
        **{f"encoder_attn.{a}": f"cross_attn.{b}" for a, b in _PROJ.items()},
        **{
            "self_attn.relative_pos_proj": "self_attn.relative_pos_embeddings",
            "encoder_attn_layer_norm": "cross_attn_layer_norm",
        },
    ),
}
EMBEDDING_COPIES = (
    "prophetnet.word_embeddings.weight",
    "prophetnet.encoder.word_embeddings.weight",
    "prophetnet.decoder.word_embeddings.weight",
    "lm_head.weight",
)
# each fairseq option of the prophetnet architecture -> the ProphetNetConfig key of its setting
CONFIG_KEYS = {
    "decoder_embed_dim": "hidden_size",
    "encoder_embed_dim": "hidden_size",
    "encoder_ffn_embed_dim": "encoder_ffn_dim",
    "decoder_ffn_embed_dim": "decoder_ffn_dim",
    "encoder_layers": "num_encoder_layers",
    "decoder_layers": "num_decoder_layers",
    "encoder_attention_heads": "num_encoder_attention_heads",
    "decoder_attention_heads": "num_decoder_attention_heads",
    "ngram": "ngram",
    "num_buckets": "num_buckets",
    "relative_max_distance": "relative_max_distance",
}
# the same for the settings a config.json may leave out, with transformers' defaults
DEFAULTED_KEYS = {
    "activation_fn": ("activation_function", "gelu"),
    "dropout": ("dropout", 0.1),
    "attention_dropout": ("attention_dropout", 0.1),
    "activation_dropout": ("activation_dropout", 0.1),
}


def _layer_count(sd: Dict[str, Tensor], prefix: str) -> int:
    indices = {int(k[len(prefix) :].split(".", 1)[0]) for k in sd if k.startswith(prefix)}
    return max(indices) + 1 if indices else 0


def _name_pairs(sd_ours: Dict[str, Tensor]):
    """(our name, transformers' name) of every per-side and per-layer parameter."""
    for side in ("encoder", "decoder"):
        yield f"{side}.embed_positions.weight", f"prophetnet.{side}.position_embeddings.weight"
        for p in ("weight", "bias"):
            yield f"{side}.layernorm_embedding.{p}", f"prophetnet.{side}.embeddings_layer_norm.{p}"
        for i in range(_layer_count(sd_ours, f"{side}.layers.")):
            for ours, theirs in _LAYER_NAMES[side].items():
                for p in ("weight", "bias"):
                    yield (
                        f"{side}.layers.{i}.{ours}.{p}",
                        f"prophetnet.{side}.layers.{i}.{theirs}.{p}",
                    )


def to_transformers_state_dict(sd: Dict[str, Tensor]) -> Dict[str, Tensor]:
    """A ``prophetnet`` state dict -> ``ProphetNetForConditionalGeneration``'s."""
    out = {name: sd["encoder.embed_tokens.weight"] for name in EMBEDDING_COPIES}
    ngram = sd["decoder.ngram_embeddings.weight"]
    out["prophetnet.decoder.ngram_embeddings.weight"] = ngram.roll(-1, 0)
    for ours, theirs in _name_pairs(sd):
        out[theirs] = sd[ours]
    return out


def from_transformers_state_dict(sd: Dict[str, Tensor]) -> Dict[str, Tensor]:
    """The inverse of ``to_transformers_state_dict``."""
    embed = sd["prophetnet.word_embeddings.weight"]
    ngram = sd["prophetnet.decoder.ngram_embeddings.weight"]
    out = {
        "encoder.embed_tokens.weight": embed,
        "decoder.embed_tokens.weight": embed,
        "decoder.ngram_embeddings.weight": ngram.roll(1, 0),
    }
    layers = {
        side: _layer_count(sd, f"prophetnet.{side}.layers.") for side in ("encoder", "decoder")
    }
    skeleton = {f"{side}.layers.{i}.": None for side, n in layers.items() for i in range(n)}
    for ours, theirs in _name_pairs(skeleton):
        out[ours] = sd[theirs]
    return out


def transformers_config(args, dictionary, **overrides):
    """``transformers.ProphetNetConfig`` of the sizes in fairseq ``args`` and the symbols of
    ``dictionary``."""
    import transformers

    pad = dictionary.pad()
    rows = args.max_target_positions + pad + 2
    if args.max_source_positions + pad + 1 != rows:
        raise ValueError(
            "transformers' ProphetNet has one positions table for both sides: use "
            f"--max-source-positions {args.max_target_positions + 1} with "
            f"--max-target-positions {args.max_target_positions}"
        )
    options = {key: getattr(args, arg) for arg, key in CONFIG_KEYS.items()}
    options.update((key, getattr(args, arg)) for arg, (key, _) in DEFAULTED_KEYS.items())
    options.update(
        vocab_size=len(dictionary),
        max_position_embeddings=rows,
        pad_token_id=pad,
        bos_token_id=dictionary.bos(),
        eos_token_id=dictionary.eos(),
        decoder_start_token_id=dictionary.eos(),
    )
    options.update(overrides)
    return transformers.ProphetNetConfig(**options)


def _predict_relative_bias(
    self, hidden_states: Tensor, attn_weights: Tensor, position_ids: Tensor, buckets: Tensor
) -> Tensor:
    """Relative-position logits of the predicting streams, every query its own:
    ``out[b, k, h, t, s] = proj(hidden[b, t, k])[bucket(b, t, s), h]``."""
    from transformers.models.prophetnet.modeling_prophetnet import compute_relative_buckets

    bsz, length = hidden_states.shape[:2]
    keys = attn_weights.size(-1)
    if buckets is None:  # one decoding step: distances from the step's position to every key
        distance = torch.arange(keys, device=position_ids.device).view(1, 1, keys)
        distance = distance - position_ids.view(-1, 1, 1)
        buckets = compute_relative_buckets(
            self.num_buckets, self.relative_max_distance, distance.expand(bsz, length, keys), False
        )
    rel = self.relative_pos_embeddings(hidden_states)  # (B, T, ngram, buckets * H)
    rel = rel.view(bsz, length, self.ngram, self.num_buckets, self.num_attn_heads)
    rel = rel.permute(0, 2, 4, 1, 3)
    index = buckets.long().view(bsz, 1, 1, length, keys)
    index = index.expand(bsz, self.ngram, self.num_attn_heads, length, keys)
    return rel.gather(-1, index)


def correct_predicting_stream_layout(model) -> int:
    """Make each n-stream self-attention of a transformers ProphetNet gather its relative-position
    logits in the release's layout; returns how many were changed."""
    from transformers.models.prophetnet.modeling_prophetnet import ProphetNetNgramSelfAttention

    changed = 0
    for module in model.modules():
        if isinstance(module, ProphetNetNgramSelfAttention):
            module.get_predict_relative_pos_embeddings = types.MethodType(
                _predict_relative_bias, module
            )
            changed += 1
    return changed

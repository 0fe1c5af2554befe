"""A BERT-family checkpoint (Devlin et al. 2019, section 3.2) as one fairseq checkpoint that
``position_masked_roberta`` and ``unilm_transformer --init-from`` load (docs/pretrained.md)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Dict, List, Tuple

import torch
from torch import Tensor

from fairseq_ext.common.errors import FairseqExtError, require
from fairseq_ext.convert.training_options import command_line, save_converted
from fairseq_ext.convert.transformers_folder import (
    TransformersFolder,
    copy_tokenizer,
    require_settings,
)
from fairseq_ext.convert.vocabulary import fairseq_rows, write_dict

CONVERSION_FILE = "conversion.json"

logger = logging.getLogger(__name__)

ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": "gelu_accurate",
    "gelu_pytorch_tanh": "gelu_accurate",
    "relu": "relu",
}
_LAYER = {
    "attention.self.query": "self_attn.q_proj",
    "attention.self.key": "self_attn.k_proj",
    "attention.self.value": "self_attn.v_proj",
    "attention.output.dense": "self_attn.out_proj",
    "attention.output.LayerNorm": "self_attn_layer_norm",
    "intermediate.dense": "fc1",
    "output.dense": "fc2",
    "output.LayerNorm": "final_layer_norm",
}
_HEAD = {
    "cls.predictions.transform.dense": "encoder.lm_head.dense",
    "cls.predictions.transform.LayerNorm": "encoder.lm_head.layer_norm",
}
ENC = "encoder.sentence_encoder."
SEGMENTS = ENC + "embed_segments.weight"
INIT_SEED = 0
# fairseq option -> the BERT config key of its setting
CONFIG_KEYS = {
    "encoder_layers": "num_hidden_layers",
    "encoder_embed_dim": "hidden_size",
    "encoder_ffn_embed_dim": "intermediate_size",
    "encoder_attention_heads": "num_attention_heads",
    "max_positions": "max_position_embeddings",
}
SIZES = ("vocab_size", *CONFIG_KEYS.values())
NUMBERS = ("layer_norm_eps", "hidden_dropout_prob", "attention_probs_dropout_prob")


def _strip_prefix(state: Dict[str, Tensor]) -> Dict[str, Tensor]:
    return {(k[len("bert.") :] if k.startswith("bert.") else k): v for k, v in state.items()}


def check_config(config: dict, path) -> None:
    """A BERT config with its sizes, of a variant the post-norm encoder reproduces."""
    require(
        config.get("model_type") == "bert",
        f"{path}: model_type is {config.get('model_type')!r}, not 'bert'; this converts "
        "BERT-family checkpoints (BertModel, BertForMaskedLM) and ProphetNet",
    )
    require(
        config.get("position_embedding_type", "absolute") == "absolute",
        f"{path}: position_embedding_type {config.get('position_embedding_type')!r}; only absolute "
        "(learned) positions map to fairseq's",
    )
    require(
        isinstance(config.get("hidden_act"), str) and config["hidden_act"] in ACTIVATIONS,
        f"{path}: hidden_act {config.get('hidden_act')!r} has no fairseq equivalent; supported: "
        f"{', '.join(ACTIVATIONS)}",
    )
    require_settings(config, path, SIZES, NUMBERS, heads=["num_attention_heads"])


def model_options(config: dict) -> List[str]:
    options = {arg: config[key] for arg, key in CONFIG_KEYS.items()}
    return command_line(
        {
            **options,
            "activation_fn": ACTIVATIONS[config["hidden_act"]],
            "layernorm_eps": repr(float(config.get("layer_norm_eps", 1e-12))),
            "dropout": config.get("hidden_dropout_prob", 0.1),
            "attention_dropout": config.get("attention_probs_dropout_prob", 0.1),
        }
    )


def convert_state(
    state: Dict[str, Tensor], config: dict, rows: Tensor
) -> Tuple[Dict[str, Tensor], List[str]]:
    """BERT's parameters in fairseq's RoBERTa names, and the BERT names left unused."""
    sd = _strip_prefix(state)
    used = set()

    def take(name: str) -> Tensor:
        if name not in sd:
            raise FairseqExtError(
                f"the checkpoint has no {name}; is it a BertModel / BertForMaskedLM?"
            )
        used.add(name)
        return sd[name]

    words = take("embeddings.word_embeddings.weight")
    require(
        words.size(0) == len(rows),
        f"the checkpoint has {words.size(0)} vocabulary rows, the vocabulary "
        f"{len(rows)} tokens; give the tokenizer files saved with this model",
    )
    types = take("embeddings.token_type_embeddings.weight")
    positions = take("embeddings.position_embeddings.weight")
    dim = words.size(1)
    out = {
        ENC + "embed_tokens.weight": words[rows],
        ENC + "embed_positions.weight": torch.cat(
            [positions.new_zeros(2, dim), positions + types[0]]
        ),
        SEGMENTS: types - types[0],
    }
    for p in ("weight", "bias"):
        out[f"{ENC}layernorm_embedding.{p}"] = take(f"embeddings.LayerNorm.{p}")
    for i in range(config["num_hidden_layers"]):
        for theirs, ours in _LAYER.items():
            for p in ("weight", "bias"):
                out[f"{ENC}layers.{i}.{ours}.{p}"] = take(f"encoder.layer.{i}.{theirs}.{p}")
    out["encoder.lm_head.weight"] = out[ENC + "embed_tokens.weight"]
    if any(k.startswith("cls.predictions.") for k in sd):
        for theirs, ours in _HEAD.items():
            for p in ("weight", "bias"):
                out[f"{ours}.{p}"] = take(f"{theirs}.{p}")
        bias = sd.get("cls.predictions.bias", sd.get("cls.predictions.decoder.bias"))
        require(
            bias is not None, "the checkpoint's MLM head has no output bias (cls.predictions.bias)"
        )
        used.update({"cls.predictions.bias", "cls.predictions.decoder.bias"})
        out["encoder.lm_head.bias"] = bias[rows]
        decoder = sd.get("cls.predictions.decoder.weight")
        used.add("cls.predictions.decoder.weight")
        require(
            decoder is None or torch.equal(decoder, words),
            "the checkpoint's MLM output layer is not tied to the word embeddings; both fairseq "
            "models tie them, so it cannot be converted exactly",
        )
    else:
        logger.info(
            "no MLM head in the checkpoint (a BertModel): encoder.lm_head starts freshly "
            "initialised (dense N(0, 0.02), layer norm 1/0, bias 0)"
        )
        generator = torch.Generator().manual_seed(INIT_SEED)
        out["encoder.lm_head.dense.weight"] = torch.randn(dim, dim, generator=generator) * 0.02
        out["encoder.lm_head.dense.bias"] = torch.zeros(dim)
        out["encoder.lm_head.layer_norm.weight"] = torch.ones(dim)
        out["encoder.lm_head.layer_norm.bias"] = torch.zeros(dim)
        out["encoder.lm_head.bias"] = torch.zeros(len(rows))
    generator = torch.Generator().manual_seed(INIT_SEED + 1)
    out["encoder.mask_position_embedding"] = types[0] + torch.randn(dim, generator=generator) * 0.02
    out["encoder.position_classifier.weight"] = (
        torch.randn(config["max_position_embeddings"], dim, generator=generator) * 0.02
    )
    out["encoder.position_classifier.bias"] = torch.zeros(config["max_position_embeddings"])
    unused = sorted(k for k in sd if k not in used and k != "embeddings.position_ids")
    return out, unused


def convert(folder: TransformersFolder, out: Path) -> dict:
    """Write ``out/model.pt``, ``out/dict.txt`` and the tokenizer files; returns user notes."""
    config = folder.config
    check_config(config, folder.path)
    tokens, rows = fairseq_rows(folder.vocab, folder.specials)
    out.mkdir(parents=True, exist_ok=True)
    write_dict(out / "dict.txt", tokens)
    copy_tokenizer(folder.path, out)  # the Python API reads text with it (fairseq_ext.hub)
    state, unused = convert_state(folder.state, config, rows)
    options = model_options(config)
    task = ["--task", "position_masked_lm", "--criterion", "position_masked_lm"]
    arch = ["--arch", "position_masked_roberta", "--optimizer", "adam"]
    positions = ["--tokens-per-sample", str(config["max_position_embeddings"])]
    save_converted(out, [*task, *arch, *positions, *options], state, extra=[SEGMENTS])
    if unused:
        logger.info("not used by either model: %s", ", ".join(unused))
    stripped = _strip_prefix(folder.state)
    head = "converted" if any(k.startswith("cls.predictions.") for k in stripped) else "new"
    # the Python API warns at load when fill_mask would use a head that was never trained
    (out / CONVERSION_FILE).write_text(
        json.dumps({"model_type": "bert", "mlm_head": head}) + "\n", encoding="utf-8"
    )
    return {
        "checkpoint": str(out / "model.pt"),
        "dictionary": str(out / "dict.txt"),
        "options": options,
        "mlm_head": head,
        "unused": unused,
        "vocabulary": len(rows),
    }

"""ProphetNet checkpoints (Qi et al. 2020) both ways: a transformers
``ProphetNetForConditionalGeneration`` folder <-> a ``prophetnet`` checkpoint and ``dict.txt``
(vocabulary rows permuted, position rows shifted; docs/pretrained.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional

import torch
from torch import Tensor

from fairseq_ext import plugin
from fairseq_ext.checkpoints import converted
from fairseq_ext.common.errors import FairseqExtError, require
from fairseq_ext.convert.prophetnet_transformers import (
    from_transformers_state_dict,
    to_transformers_state_dict,
    transformers_config,
)
from fairseq_ext.convert.training_options import training_args
from fairseq_ext.convert.transformers_folder import (
    TransformersFolder,
    copy_tokenizer,
    load_specials,
    load_vocab,
    require_settings,
    write_folder,
)
from fairseq_ext.convert.vocabulary import (
    FAIRSEQ_SPECIALS,
    MASK,
    checkpoint_rows,
    fairseq_rows,
    write_dict,
)

FAIRSEQ_PAD = 1
SIZES = (
    "vocab_size",
    "hidden_size",
    "num_encoder_layers",
    "num_decoder_layers",
    "encoder_ffn_dim",
    "decoder_ffn_dim",
    "num_encoder_attention_heads",
    "num_decoder_attention_heads",
    "ngram",
    "num_buckets",
    "relative_max_distance",
    "max_position_embeddings",
)
NUMBERS = ("dropout", "attention_dropout", "activation_dropout")
_WORD_EMBEDDINGS = (
    "prophetnet.word_embeddings.weight",
    "prophetnet.encoder.word_embeddings.weight",
    "prophetnet.decoder.word_embeddings.weight",
    "lm_head.weight",
)


def shift_rows(table: Tensor, shift: int) -> Tensor:
    """Position rows moved down by ``shift`` (zero rows in front), or up (rows dropped)."""
    if shift >= 0:
        return torch.cat([table.new_zeros(shift, table.size(1)), table])
    return table[-shift:]


def check_config(config: dict, path) -> None:
    require(
        config.get("model_type") == "prophetnet",
        f"{path}: model_type is {config.get('model_type')!r}, not 'prophetnet'",
    )
    require(
        config.get("activation_function", "gelu") in ("gelu", "relu"),
        f"{path}: activation_function {config.get('activation_function')!r} is not supported",
    )
    require_settings(config, path, SIZES, NUMBERS)
    for heads in ("num_encoder_attention_heads", "num_decoder_attention_heads"):
        require(
            config["hidden_size"] % config[heads] == 0,
            f"{path}: hidden_size {config['hidden_size']} is not divisible by {heads} "
            f"{config[heads]}",
        )


def _check_ids(folder: TransformersFolder) -> None:
    config, vocab, specials = folder.config, folder.vocab, folder.specials
    for key, role in (
        ("pad_token_id", "pad_token"),
        ("eos_token_id", "sep_token"),
        ("decoder_start_token_id", "sep_token"),
    ):
        token_id = config.get(key)
        require(
            type(token_id) is int
            and 0 <= token_id < len(vocab)
            and vocab[token_id] == specials[role],
            f"{folder.path}: config.json's {key} {token_id} is not the tokenizer's {role} "
            f"{specials[role]!r}; give the tokenizer files saved with this model",
        )


def options_of(config: dict, shift: int) -> List[str]:
    """fairseq options of the same sizes (position tables of ``P`` rows: ``P + shift - 2`` source
    and ``P + shift - 3`` target positions)."""
    rows = config["max_position_embeddings"] + shift
    return [
        "--arch",
        "prophetnet",
        "--encoder-layers",
        str(config["num_encoder_layers"]),
        "--decoder-layers",
        str(config["num_decoder_layers"]),
        "--encoder-embed-dim",
        str(config["hidden_size"]),
        "--decoder-embed-dim",
        str(config["hidden_size"]),
        "--encoder-ffn-embed-dim",
        str(config["encoder_ffn_dim"]),
        "--decoder-ffn-embed-dim",
        str(config["decoder_ffn_dim"]),
        "--encoder-attention-heads",
        str(config["num_encoder_attention_heads"]),
        "--decoder-attention-heads",
        str(config["num_decoder_attention_heads"]),
        "--ngram",
        str(config["ngram"]),
        "--num-buckets",
        str(config["num_buckets"]),
        "--relative-max-distance",
        str(config["relative_max_distance"]),
        "--max-source-positions",
        str(rows - FAIRSEQ_PAD - 1),
        "--max-target-positions",
        str(rows - FAIRSEQ_PAD - 2),
        "--activation-fn",
        config.get("activation_function", "gelu"),
        "--dropout",
        str(config.get("dropout", 0.1)),
        "--attention-dropout",
        str(config.get("attention_dropout", 0.1)),
        "--activation-dropout",
        str(config.get("activation_dropout", 0.1)),
    ]


def _embedding(state: Dict[str, Tensor]) -> Tensor:
    for name in _WORD_EMBEDDINGS:
        if name in state:
            return state[name]
    raise FairseqExtError(
        "the checkpoint has no word embeddings (prophetnet.word_embeddings.weight); is it a "
        "ProphetNetForConditionalGeneration?"
    )


def convert_from_transformers(folder: TransformersFolder, out: Path) -> dict:
    """Write ``out/model.pt`` (task ``translation_prophetnet``, data folder ``out``), the
    dictionaries and the tokenizer files."""
    config = folder.config
    check_config(config, folder.path)
    _check_ids(folder)
    tokens, rows = fairseq_rows(folder.vocab, folder.specials)
    state = dict(folder.state)
    state["prophetnet.word_embeddings.weight"] = _embedding(state)
    try:
        sd = from_transformers_state_dict(state)
    except KeyError as exc:
        raise FairseqExtError(
            f"{folder.path}: the checkpoint has no {exc.args[0]}; is it a "
            "ProphetNetForConditionalGeneration of the config's sizes?"
        ) from None
    embed = sd["encoder.embed_tokens.weight"][rows]
    sd["encoder.embed_tokens.weight"] = sd["decoder.embed_tokens.weight"] = embed
    shift = FAIRSEQ_PAD - config["pad_token_id"]
    for side in ("encoder", "decoder"):
        sd[f"{side}.embed_positions.weight"] = shift_rows(
            sd[f"{side}.embed_positions.weight"], shift
        )
    out.mkdir(parents=True, exist_ok=True)
    for name in (
        "dict.txt",
        "dict.src.txt",
        "dict.tgt.txt",
    ):  # the task's dictionaries, out is its data
        write_dict(out / name, tokens)
    copy_tokenizer(folder.path, out)  # the Python API reads text with it (fairseq_ext.hub)
    options = options_of(config, shift)
    args = training_args(
        out,
        [
            "--task",
            "translation_prophetnet",
            "-s",
            "src",
            "-t",
            "tgt",
            "--criterion",
            "ngram_language_loss",
            "--optimizer",
            "adam",
            *options,
        ],
    )
    _, model = converted.build_model(args)
    state_out = converted.fill(model, sd)
    state_out["decoder.embed_tokens.weight"] = state_out["encoder.embed_tokens.weight"]
    converted.save(out / "model.pt", args, state_out)
    return {
        "checkpoint": str(out / "model.pt"),
        "dictionary": str(out / "dict.txt"),
        "options": options,
        "vocabulary": len(rows),
    }


def export_to_transformers(
    checkpoint: Path,
    out: Path,
    dictionary: Optional[Path] = None,
    vocab_folder: Optional[Path] = None,
) -> dict:
    """Write a ``prophetnet`` checkpoint as a ``save_pretrained`` folder."""
    from fairseq import checkpoint_utils
    from fairseq.data import Dictionary

    plugin.load()  # the safe checkpoint loader
    require(
        Path(checkpoint).is_file(),
        f"{checkpoint} does not exist; give a prophetnet checkpoint (.pt)",
    )
    state = checkpoint_utils.load_checkpoint_to_cpu(str(checkpoint))
    args = (state.get("cfg") or {}).get("model")
    require(
        args is not None and getattr(args, "arch", "").startswith("prophetnet"),
        f"{checkpoint} is not a prophetnet checkpoint "
        f"(architecture {getattr(args, 'arch', None)!r})",
    )
    dict_path = Path(dictionary) if dictionary else Path(checkpoint).parent / "dict.txt"
    require(
        dict_path.is_file(), f"{dict_path} does not exist; give the model's dictionary with --dict"
    )
    fairseq_dict = Dictionary.load(str(dict_path))
    fairseq_dict.add_symbol(MASK[0])
    sd = dict(state["model"])
    rows_in_model = sd["encoder.embed_tokens.weight"].size(0)
    require(
        rows_in_model == len(fairseq_dict),
        f"vocabulary mismatch: {checkpoint} has {rows_in_model} vocabulary rows, {dict_path} gives "
        f"{len(fairseq_dict)} with <mask>; give the dictionary the model was trained with",
    )
    if vocab_folder is not None:
        vocab, specials = load_vocab(Path(vocab_folder)), load_specials(Path(vocab_folder))
        order = checkpoint_rows(fairseq_dict.symbols, vocab, specials)
        pad, eos = vocab.index(specials["pad_token"]), vocab.index(specials["sep_token"])
        bos = eos  # ProphetNet's release: [SEP] begins and ends
    else:
        vocab = list(fairseq_dict.symbols)
        specials = {role: symbol for symbol, role in (*FAIRSEQ_SPECIALS, MASK)}
        order = torch.arange(len(vocab))
        pad, bos, eos = fairseq_dict.pad(), fairseq_dict.bos(), fairseq_dict.eos()
    shift = FAIRSEQ_PAD - pad
    sd["encoder.embed_tokens.weight"] = sd["encoder.embed_tokens.weight"][order]
    for side in ("encoder", "decoder"):
        sd[f"{side}.embed_positions.weight"] = shift_rows(
            sd[f"{side}.embed_positions.weight"], -shift
        )
    config = transformers_config(
        args,
        fairseq_dict,
        vocab_size=len(vocab),
        pad_token_id=pad,
        bos_token_id=bos,
        eos_token_id=eos,
        decoder_start_token_id=eos,
        max_position_embeddings=sd["encoder.embed_positions.weight"].size(0),
    )
    config_dict = config.to_dict()
    config_dict["architectures"] = ["ProphetNetForConditionalGeneration"]
    write_folder(
        out,
        config_dict,
        to_transformers_state_dict(sd),
        vocab,
        specials,
        tokenizer_from=vocab_folder,
    )
    return {"folder": str(out), "vocabulary": len(vocab), "pad_token_id": pad, "eos_token_id": eos}

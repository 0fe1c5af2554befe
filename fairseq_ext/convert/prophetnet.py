"""ProphetNet checkpoints (Qi et al. 2020) both ways: a transformers
``ProphetNetForConditionalGeneration`` folder <-> a ``prophetnet`` checkpoint and ``dict.txt``
(vocabulary rows permuted, position rows shifted; docs/pretrained.md)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import torch
from torch import Tensor

from fairseq_ext import plugin
from fairseq_ext.common.errors import FairseqExtError, require
from fairseq_ext.convert.prophetnet_transformers import (
    CONFIG_KEYS,
    DEFAULTED_KEYS,
    EMBEDDING_COPIES,
    from_transformers_state_dict,
    to_transformers_state_dict,
    transformers_config,
)
from fairseq_ext.convert.training_options import command_line, save_converted
from fairseq_ext.convert.transformers_folder import (
    TransformersFolder,
    copy_tokenizer,
    load_specials,
    load_vocab,
    require_settings,
    write_folder,
)
from fairseq_ext.convert.vocabulary import (
    DICTIONARIES,
    FAIRSEQ_SPECIALS,
    MASK,
    checkpoint_rows,
    fairseq_rows,
    write_dict,
)

FAIRSEQ_PAD = 1
SIZES = ("vocab_size", *dict.fromkeys(CONFIG_KEYS.values()), "max_position_embeddings")
NUMBERS = ("dropout", "attention_dropout", "activation_dropout")


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
    heads = ("num_encoder_attention_heads", "num_decoder_attention_heads")
    require_settings(config, path, SIZES, NUMBERS, heads)


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
    options = {arg: config[key] for arg, key in CONFIG_KEYS.items()}
    options.update(
        (arg, config.get(key, default)) for arg, (key, default) in DEFAULTED_KEYS.items()
    )
    options.update(
        max_source_positions=rows - FAIRSEQ_PAD - 1, max_target_positions=rows - FAIRSEQ_PAD - 2
    )
    return ["--arch", "prophetnet", *command_line(options)]


def convert_from_transformers(folder: TransformersFolder, out: Path) -> dict:
    """Write ``out/model.pt`` (task ``translation_prophetnet``, data folder ``out``), the
    dictionaries and the tokenizer files."""
    config = folder.config
    check_config(config, folder.path)
    _check_ids(folder)
    tokens, rows = fairseq_rows(folder.vocab, folder.specials)
    state = dict(folder.state)
    embedding = next((state[name] for name in EMBEDDING_COPIES if name in state), None)
    require(
        embedding is not None,
        "the checkpoint has no word embeddings (prophetnet.word_embeddings.weight); is it a "
        "ProphetNetForConditionalGeneration?",
    )
    state["prophetnet.word_embeddings.weight"] = embedding
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
    for name in ("encoder.embed_positions.weight", "decoder.embed_positions.weight"):
        sd[name] = shift_rows(sd[name], shift)
    out.mkdir(parents=True, exist_ok=True)
    for name in DICTIONARIES:  # out is the task's data folder
        write_dict(out / name, tokens)
    copy_tokenizer(folder.path, out)  # the Python API reads text with it (fairseq_ext.hub)
    options = options_of(config, shift)
    task = ["--task", "translation_prophetnet", "-s", "src", "-t", "tgt"]
    save_converted(
        out,
        [*task, "--criterion", "ngram_language_loss", "--optimizer", "adam", *options],
        sd,
        tied=[("decoder.embed_tokens.weight", "encoder.embed_tokens.weight")],
    )
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
    for name in ("encoder.embed_positions.weight", "decoder.embed_positions.weight"):
        sd[name] = shift_rows(sd[name], -shift)
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
    config = {**config.to_dict(), "architectures": ["ProphetNetForConditionalGeneration"]}
    write_folder(out, config, to_transformers_state_dict(sd), vocab, specials, vocab_folder)
    return {"folder": str(out), "vocabulary": len(vocab), "pad_token_id": pad, "eos_token_id": eos}

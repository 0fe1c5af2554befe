"""``--init-from``: start ``unilm_transformer`` from a ``roberta`` (or
``position_masked_roberta``) checkpoint so that it computes RoBERTa's function on
``<s> source </s>`` (docs/unilm.md); and the checks both one-stack tasks make of their model."""

from __future__ import annotations

import logging
import os
from typing import Optional

import torch
from fairseq.data import Dictionary

from fairseq_ext.checkpoints.starting import copy_weights, load_start_checkpoint
from fairseq_ext.common.config_fields import option_value
from fairseq_ext.common.errors import FairseqExtError, require
from fairseq_ext.common.families import masks_of_task, tasks_of_mask
from fairseq_ext.data.mask_symbol import load_with_mask_symbol
from fairseq_ext.models.shared_options import LayerNormEpsConfig
from fairseq_ext.models.unilm_transformer import UniLMTransformerModel

logger = logging.getLogger(__name__)

RENAMES = (("encoder.sentence_encoder.", "encoder."), ("encoder.lm_head.", "encoder.lm_head."))
ZERO_INITIALISED = ("encoder.embed_segments.weight", "encoder.embed_next_positions.weight")
VOCAB_ROWS = ("encoder.embed_tokens.weight", "encoder.lm_head.weight", "encoder.lm_head.bias")


def _renamed(key: str) -> Optional[str]:
    for old, new in RENAMES:
        if key.startswith(old):
            return new + key[len(old) :]
    return None


def _check_structure(path: str, args: dict, model_args) -> None:
    """RoBERTa variants whose function this post-norm stack cannot reproduce."""
    require(
        not args.get("encoder_normalize_before", False),
        f"--init-from {path}: the checkpoint is a pre-norm RoBERTa (encoder_normalize_before); "
        "unilm_transformer is post-norm like BERT/RoBERTa-base, so use a post-norm checkpoint",
    )
    require(
        args.get("layernorm_embedding", True),
        f"--init-from {path}: the checkpoint has no embedding layer norm; use a RoBERTa-style "
        "checkpoint",
    )
    require(
        not args.get("untie_weights_roberta", False),
        f"--init-from {path}: the checkpoint unties its LM head from the embedding; "
        "unilm_transformer ties them, so use a checkpoint trained without --untie-weights-roberta",
    )
    eps = args.get("layernorm_eps", LayerNormEpsConfig.layernorm_eps)
    require(
        eps == model_args.layernorm_eps,
        f"--init-from {path}: the checkpoint's layer norms use epsilon {eps:g}, the model's "
        f"{model_args.layernorm_eps:g}; pass --layernorm-eps {eps:g}",
    )
    theirs, ours = args.get("activation_fn"), option_value(model_args, "activation_fn")
    require(
        theirs is None or theirs == ours,
        f"--init-from {path}: the checkpoint uses --activation-fn {theirs}, the model "
        f"{ours}; pass --activation-fn {theirs}",
    )


def _check_dictionary(path: str, data: Optional[str], dictionary: Dictionary) -> None:
    """Refuse data whose dictionary differs from the dict.txt the checkpoint was trained with,
    when that file is on this machine (beside the checkpoint or in its data folder)."""
    candidates = [os.path.join(os.path.dirname(os.path.abspath(path)), "dict.txt")]
    if data:
        candidates.append(os.path.join(str(data).split(os.pathsep)[0], "dict.txt"))
    dict_path = next((c for c in candidates if os.path.isfile(c)), None)
    if dict_path is None:
        return
    pretrained = load_with_mask_symbol(dict_path)
    for i, (a, b) in enumerate(zip(pretrained.symbols, dictionary.symbols)):
        require(
            a == b,
            f"--init-from {path}: token {i} is {a!r} in the pretraining dictionary "
            f"{dict_path} but {b!r} in the data's; binarize the data with "
            f"fairseq-preprocess --srcdict {dict_path} --joined-dictionary",
        )


def init_from_pretrained(
    model, path: str, dictionary: Dictionary, keep_ids: Optional[torch.Tensor] = None
) -> None:
    """Copy a RoBERTa-style checkpoint into ``model``, keeping the rows ``keep_ids`` of the
    pretraining ``dictionary`` (all if None)."""
    start = load_start_checkpoint(path)
    _check_structure(path, start.options, model.args)
    renamed = {key: _renamed(key) for key in start.weights}
    theirs = {new: start.weights[key] for key, new in renamed.items() if new is not None}
    own = model.state_dict()
    vocab = theirs.get("encoder.embed_tokens.weight")
    require(
        vocab is not None,
        f"--init-from {path}: no encoder.sentence_encoder.embed_tokens.weight; "
        "is it a fairseq roberta checkpoint?",
    )
    require(
        vocab.size(0) == len(dictionary),
        f"--init-from {path}: the checkpoint has {vocab.size(0)} vocabulary rows but the data's "
        f"dictionary has {len(dictionary)} (with <mask>); binarize the data with the pretrained "
        "model's dictionary: fairseq-preprocess --srcdict PRETRAINED/dict.txt --joined-dictionary",
    )
    _check_dictionary(path, start.data, dictionary)
    missing = [k for k in own if k not in theirs and k not in ZERO_INITIALISED]
    if missing:
        n_theirs = len({k.split(".")[2] for k in theirs if k.startswith("encoder.layers.")})
        raise FairseqExtError(
            f"--init-from {path}: the checkpoint lacks {missing[0]} ({len(missing)} missing "
            f"parameters); it has {n_theirs} layers, the model {len(model.encoder.layers)}: use "
            "the checkpoint's sizes (--encoder-layers, --encoder-embed-dim, ...)"
        )
    weights = {}
    for name, tensor in own.items():
        if name in ZERO_INITIALISED and name not in theirs:
            weights[name] = torch.zeros_like(tensor)
        elif name in VOCAB_ROWS and keep_ids is not None:
            weights[name] = theirs[name].index_select(0, keep_ids)
        else:
            weights[name] = theirs[name]
    copy_weights(
        model,
        weights,
        f"--init-from {path}",
        "give the model the checkpoint's sizes "
        "(--encoder-embed-dim, --encoder-ffn-embed-dim, --max-positions)",
    )
    unused = sorted(k for k, new in renamed.items() if new not in own)
    kept = (
        f", keeping {len(keep_ids)} of {len(dictionary)} vocabulary rows"
        if keep_ids is not None
        else ""
    )
    logger.info(
        "initialised unilm_transformer from %s%s; zero-initialised %s",
        path,
        kept,
        ", ".join(k for k in ZERO_INITIALISED if k not in theirs),
    )
    if unused:
        logger.info(
            "--init-from %s: ignored %d checkpoint parameters the model does not use: %s",
            path,
            len(unused),
            ", ".join(unused),
        )


def prepare_unilm_model(
    model,
    cfg,
    *,
    task: str,
    dictionary: Dictionary,
    keep_ids: Optional[torch.Tensor] = None,
    from_checkpoint: bool,
) -> None:
    """Check that fairseq built a ``unilm_transformer`` with a mask the ``task`` trains
    (``families.masks_of_task``), and start a new one from ``--init-from``."""
    require(
        isinstance(model, UniLMTransformerModel),
        f"--task {task} runs on one stack: use --arch unilm_transformer, unilm_transformer_base or "
        "unilm_transformer_tiny",
    )
    mask = model.attention_mask
    accepted = masks_of_task(task)
    require(
        mask in accepted,
        f"--attention-mask {mask} is for --task {' or '.join(tasks_of_mask(mask))}; "
        f"{task} takes {' or '.join(accepted)}",
    )
    init_from = getattr(cfg, "init_from", None)
    if init_from and not from_checkpoint:
        init_from_pretrained(model, init_from, dictionary, keep_ids)

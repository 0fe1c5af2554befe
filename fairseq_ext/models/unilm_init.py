"""BERT weights become a seq2seq model: initialise ``unilm_transformer`` from a fairseq
``roberta`` (or ``position_masked_roberta``) checkpoint, optionally keeping only some
vocabulary rows (Su 2019's ``keep_tokens``, section "Brief Explanation").

RoBERTa's parameters are named ``encoder.sentence_encoder.*`` and ``encoder.lm_head.*``;
``unilm_transformer`` uses the same names without ``sentence_encoder``. Parameters the
checkpoint has and the model does not use (a classification head, a position-masking
head, a ``version`` buffer) are ignored and named in one log line. The model's own extras,
the segment and next-position embeddings, start at zero, so the loaded stack computes
exactly RoBERTa's function on ``<s> source </s>``. Any shape, dictionary or structural
mismatch is an error that names the parameter and the fix.

``prepare_unilm_model`` is what both one-stack tasks (``unilm_seq2seq``, ``permutation_lm``)
do with the model fairseq built for them: check its family and attention mask, then
``--init-from``.
"""
from __future__ import annotations

import logging
import os
from argparse import Namespace
from typing import Optional

import torch
from fairseq.data import Dictionary

from fairseq_ext.errors import FairseqExtError, require
from fairseq_ext.masking import ATTENTION_VARIANTS, masks_of_task
from fairseq_ext.models.layer_norm_eps import DEFAULT_LAYERNORM_EPS
from fairseq_ext.models.unilm_transformer import UniLMTransformerModel

logger = logging.getLogger(__name__)

RENAMES = (("encoder.sentence_encoder.", "encoder."), ("encoder.lm_head.", "encoder.lm_head."))
ZERO_INITIALISED = ("encoder.embed_segments.weight", "encoder.embed_next_positions.weight")
VOCAB_ROWS = ("encoder.embed_tokens.weight", "encoder.lm_head.weight", "encoder.lm_head.bias")


def _renamed(key: str) -> Optional[str]:
    """The model's name for a RoBERTa parameter, or None if it has none."""
    for old, new in RENAMES:
        if key.startswith(old):
            return new + key[len(old):]
    return None


def _model_args(state: dict) -> dict:
    cfg = state.get("cfg") or {}
    model = cfg.get("model") if hasattr(cfg, "get") else None
    if model is None:
        model = state.get("args")
    if isinstance(model, Namespace):
        return vars(model)
    return dict(model) if model is not None else {}


def _check_structure(path: str, args: dict, model_args) -> None:
    """RoBERTa variants whose function this post-norm stack cannot reproduce."""
    require(not args.get("encoder_normalize_before", False),
            f"--init-from {path}: the checkpoint is a pre-norm RoBERTa (encoder_normalize_before); "
            "unilm_transformer is post-norm like BERT/RoBERTa-base, so use a post-norm checkpoint")
    require(args.get("layernorm_embedding", True),
            f"--init-from {path}: the checkpoint has no embedding layer norm; use a RoBERTa-style checkpoint")
    require(not args.get("untie_weights_roberta", False),
            f"--init-from {path}: the checkpoint unties its LM head from the embedding; "
            "unilm_transformer ties them, so use a checkpoint trained without --untie-weights-roberta")
    eps = args.get("layernorm_eps", DEFAULT_LAYERNORM_EPS)
    require(eps == model_args.layernorm_eps,
            f"--init-from {path}: the checkpoint's layer norms use epsilon {eps:g}, the model's "
            f"{model_args.layernorm_eps:g}; pass --layernorm-eps {eps:g}")
    theirs = args.get("activation_fn")
    require(theirs is None or theirs == model_args.activation_fn,
            f"--init-from {path}: the checkpoint uses --activation-fn {theirs}, the model "
            f"{model_args.activation_fn}; pass --activation-fn {theirs}")


def _pretraining_dictionary(path: str, args: dict, state: dict) -> Optional[str]:
    """The dict.txt the checkpoint was trained with, when it is on this machine."""
    candidates = [os.path.join(os.path.dirname(os.path.abspath(path)), "dict.txt")]
    cfg = state.get("cfg") or {}
    task = cfg.get("task") if hasattr(cfg, "get") else None
    data = (task.get("data") if hasattr(task, "get") else getattr(task, "data", None)) or args.get("data")
    if data:
        candidates.append(os.path.join(str(data).split(os.pathsep)[0], "dict.txt"))
    return next((c for c in candidates if os.path.isfile(c)), None)


def _check_dictionary(path: str, dict_path: str, dictionary: Dictionary) -> None:
    pretrained = Dictionary.load(dict_path)
    pretrained.add_symbol("<mask>")
    for i, (a, b) in enumerate(zip(pretrained.symbols, dictionary.symbols)):
        require(a == b, f"--init-from {path}: token {i} is {a!r} in the pretraining dictionary "
                        f"{dict_path} but {b!r} in the data's; binarize the data with "
                        f"fairseq-preprocess --srcdict {dict_path} --joined-dictionary")


def init_from_pretrained(model, path: str, dictionary: Dictionary,
                         keep_ids: Optional[torch.Tensor] = None) -> None:
    """Copy a RoBERTa-style checkpoint into ``model`` (a ``UniLMTransformerModel``).

    Args:
        model: the freshly built model.
        path: a fairseq checkpoint of ``roberta`` or a model that keeps its names.
        dictionary: the full dictionary of the data (with ``<mask>``), which must be the
            pretraining dictionary.
        keep_ids: rows of the full vocabulary to keep (``--keep-tokens``), in the order of
            the model's pruned dictionary; None keeps all.
    """
    from fairseq import checkpoint_utils

    state = checkpoint_utils.load_checkpoint_to_cpu(path)
    args = _model_args(state)
    _check_structure(path, args, model.args)
    renamed = {key: _renamed(key) for key in state["model"]}
    theirs = {new: state["model"][key] for key, new in renamed.items() if new is not None}
    own = model.state_dict()
    vocab = theirs.get("encoder.embed_tokens.weight")
    require(vocab is not None, f"--init-from {path}: no encoder.sentence_encoder.embed_tokens.weight; "
                               "is it a fairseq roberta checkpoint?")
    if vocab.size(0) != len(dictionary):
        raise FairseqExtError(
            f"--init-from {path}: the checkpoint has {vocab.size(0)} vocabulary rows but the data's "
            f"dictionary has {len(dictionary)} (with <mask>); binarize the data with the pretrained "
            "model's dictionary: fairseq-preprocess --srcdict PRETRAINED/dict.txt --joined-dictionary"
        )
    dict_path = _pretraining_dictionary(path, args, state)
    if dict_path is not None:
        _check_dictionary(path, dict_path, dictionary)
    missing = [k for k in own if k not in theirs and k not in ZERO_INITIALISED]
    if missing:
        n_theirs = len({k.split(".")[2] for k in theirs if k.startswith("encoder.layers.")})
        raise FairseqExtError(
            f"--init-from {path}: the checkpoint lacks {missing[0]} ({len(missing)} missing "
            f"parameters); it has {n_theirs} layers, the model {len(model.encoder.layers)}: use the "
            "checkpoint's sizes (--encoder-layers, --encoder-embed-dim, ...)"
        )
    new_state = {}
    for name, value in own.items():
        if name in ZERO_INITIALISED and name not in theirs:
            new_state[name] = torch.zeros_like(value)
            continue
        loaded = theirs[name]
        if name in VOCAB_ROWS and keep_ids is not None:
            loaded = loaded.index_select(0, keep_ids)
        if loaded.shape != value.shape:
            raise FairseqExtError(
                f"--init-from {path}: {name} has shape {tuple(loaded.shape)} there and "
                f"{tuple(value.shape)} here; give the model the checkpoint's sizes "
                "(--encoder-embed-dim, --encoder-ffn-embed-dim, --max-positions)"
            )
        new_state[name] = loaded.to(value.dtype)
    unused = sorted(k for k, new in renamed.items() if new not in own)
    with torch.no_grad():
        model.load_state_dict(new_state, strict=True)
    kept = f", keeping {len(keep_ids)} of {len(dictionary)} vocabulary rows" if keep_ids is not None else ""
    logger.info("initialised unilm_transformer from %s%s; zero-initialised %s", path, kept,
                ", ".join(k for k in ZERO_INITIALISED if k not in theirs))
    if unused:
        logger.info("--init-from %s: ignored %d checkpoint parameters the model does not use: %s",
                    path, len(unused), ", ".join(unused))


def prepare_unilm_model(model, cfg, *, task: str, dictionary: Dictionary,
                        keep_ids: Optional[torch.Tensor] = None, from_checkpoint: bool) -> None:
    """What ``unilm_seq2seq`` and ``permutation_lm`` (``task``) do with the model fairseq built
    for them: it must be a ``unilm_transformer`` running one of the attention masks that
    ``masking.ATTENTION_VARIANTS`` lists for the task (else the error names the task that trains
    it), and a new model starts from ``--init-from`` (``init_from_pretrained`` with
    ``dictionary`` and ``keep_ids``)."""
    require(isinstance(model, UniLMTransformerModel),
            f"--task {task} runs on one stack: use --arch unilm_transformer, unilm_transformer_base or "
            "unilm_transformer_tiny")
    mask = model.attention_mask
    accepted = masks_of_task(task)
    require(mask in accepted,
            f"--attention-mask {mask} is for --task {' or '.join(ATTENTION_VARIANTS[mask].tasks)}; "
            f"{task} takes {' or '.join(accepted)}")
    init_from = getattr(cfg, "init_from", None)
    if init_from and not from_checkpoint:
        init_from_pretrained(model, init_from, dictionary, keep_ids)

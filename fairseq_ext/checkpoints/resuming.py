"""What a training starts from, checked before it trains; each problem is one line naming the
option and the fix."""

from __future__ import annotations

import argparse
import os
from argparse import Namespace
from typing import Any, Optional

from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.common.paths import require_readable_file

NOTHING_TRAINED = "nothing was trained (fairseq-train would have started from update 0)"
# model options that change neither the model nor what it learns, or act only at update 0
FREE_ON_RESUME = frozenset(
    {
        "attention_backend",
        "checkpoint_activations",
        "offload_activations",
        "min_params_to_wrap",
        "export",
        "init_from",
        "encoder_embed_path",
        "decoder_embed_path",
    }
)


def _checkpoints_in(folder: str) -> list[str]:
    try:
        return sorted(name for name in os.listdir(folder or ".") if name.endswith(".pt"))
    except OSError:
        return []


def listing(folder: str) -> str:
    """``FOLDER holds a.pt, b.pt: `` (the first eight), or nothing where it holds none."""
    found = _checkpoints_in(folder)
    return f"{folder or '.'} holds {', '.join(found[:8])}: " if found else ""


def require_checkpoint_file(path: str, option: str, fix: str) -> None:
    """``path``, given as ``option``, is a readable checkpoint file, or one line naming ``fix``."""
    if os.path.islink(path) and not os.path.exists(path):
        raise FairseqExtError(
            f"{option} {path} is a link to {os.readlink(path)}, which does not exist; {fix}"
        )
    if os.path.isdir(path):
        raise FairseqExtError(
            f"{option} {path} is a folder, not a checkpoint file; {listing(path)}{fix}"
        )
    require_readable_file(path, option, f"{listing(os.path.dirname(path))}{fix}")


def check_checkpoint_last(save_dir: str, path: str) -> None:
    """The ``checkpoint_last.pt`` of ``save_dir`` (``path``) is a file or absent."""
    name = os.path.basename(path)
    if os.path.islink(path) and not os.path.exists(path):
        raise FairseqExtError(
            f"--save-dir {save_dir}: {name} is a link to {os.readlink(path)}, which does not "
            f"exist, so the training would start again from update 0; make {os.readlink(path)} "
            f"available again (or link {name} to an existing checkpoint), or remove the link to "
            "start a new training"
        )
    if os.path.isdir(path):
        raise FairseqExtError(
            f"--save-dir {save_dir}: {name} is a folder, not a checkpoint file, so the training "
            f"would start again from update 0; move it out of {save_dir} (fairseq-train writes "
            f"{name} as a file)"
        )


def _as_dict(options: Any) -> Optional[dict]:
    if isinstance(options, Namespace):
        return vars(options)
    if hasattr(options, "items"):
        return dict(options.items())
    return None


def trained_options(path: str) -> Optional[dict]:
    """The model options saved in checkpoint ``path`` (weights unread), or None."""
    import torch

    from fairseq_ext.checkpoints.allow_list import SAFE_CHECKPOINT_GLOBALS

    torch.serialization.add_safe_globals(list(SAFE_CHECKPOINT_GLOBALS))
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # corrupt, foreign, legacy format: refused with its reason when loaded
        return None
    if not isinstance(state, dict):
        return None
    cfg = _as_dict(state.get("cfg")) or {}
    return _as_dict(cfg.get("model")) or _as_dict(state.get("args"))


def model_option_names(arch: str) -> set[str]:
    """The options the model class of ``arch`` declares (its ``add_args``)."""
    from fairseq.models import ARCH_MODEL_REGISTRY

    model_class = ARCH_MODEL_REGISTRY.get(arch)
    if model_class is None:
        return set()
    parser = argparse.ArgumentParser(add_help=False)
    model_class.add_args(parser)
    return set(vars(parser.parse_known_args([])[0]))


def _plain(value: Any) -> Any:
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(value, (DictConfig, ListConfig)):
        value = OmegaConf.to_container(value)
    return list(value) if isinstance(value, tuple) else value


def _flag(name: str, value: Any) -> str:
    flag = f"--{name.replace('_', '-')}"
    if value is True:
        return flag
    if value is False or value is None:
        return f"no {flag}"
    return f"{flag} {value}"


def differing_options(trained: dict, given: dict) -> list[tuple[str, Any, Any]]:
    """``(option, trained, given)`` for each model option that differs."""
    arch = given.get("arch") or given.get("_name")
    names = model_option_names(arch) - FREE_ON_RESUME
    differ = []
    if (trained.get("arch") or trained.get("_name")) != arch:
        differ.append(("arch", trained.get("arch") or trained.get("_name"), arch))
    for name in sorted(names & set(trained) & set(given)):
        if _plain(trained[name]) != _plain(given[name]):
            differ.append((name, trained[name], given[name]))
    return differ


def check_same_model(save_dir: str, path: str, given: Any) -> None:
    """Refuse a resume of ``save_dir`` with other model options than it was trained with."""
    trained = trained_options(path)
    given = _as_dict(given)
    if trained is None or given is None:
        return
    differ = differing_options(trained, given)
    if not differ:
        return
    theirs = " ".join(_flag(name, old) for name, old, _ in differ)
    ours = " ".join(_flag(name, new) for name, _, new in differ)
    raise FairseqExtError(
        f"--save-dir {save_dir} holds a training with other model options: {path} was trained "
        f"with {theirs}, this run gives {ours} (fairseq-train would train its weights on under "
        "this run's options and record them as the checkpoint's). Give a new --save-dir to train "
        f"with these options (add --finetune-from-model {path} to start from its weights), or the "
        "checkpoint's options to resume it"
    )

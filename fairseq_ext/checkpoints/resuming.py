"""What a training starts from, checked before it trains (``check_training_start``, run by
``fairseq_changes.preflight``), a resume with other model options refused (``check_same_model``)
and a spent budget ended (``stop_if_spent``): each problem is one line naming the option and the
fix."""

from __future__ import annotations

import argparse
import os
import re
from argparse import Namespace
from typing import Any, Optional

from fairseq_ext.checkpoints.checks import option
from fairseq_ext.checkpoints.saving import newest_complete_checkpoint
from fairseq_ext.common.errors import FairseqExtError, note
from fairseq_ext.common.paths import require_readable_file

DEFAULT_RESTORE = "checkpoint_last.pt"  # fairseq's --restore-file: that of --save-dir
NOTHING_TRAINED = "nothing was trained (fairseq-train would have started from update 0)"
# model options that change neither the model nor what it learns, or act only at update 0
FREE_ON_RESUME = frozenset(
    "attention_backend checkpoint_activations offload_activations min_params_to_wrap export "
    "init_from encoder_embed_path decoder_embed_path".split()
)


def listing(folder: str) -> str:
    """``FOLDER holds a.pt, b.pt: `` (the first eight), or nothing where it holds none."""
    try:
        found = sorted(name for name in os.listdir(folder or ".") if name.endswith(".pt"))
    except OSError:
        found = []
    return f"{folder or '.'} holds {', '.join(found[:8])}: " if found else ""


def require_checkpoint_file(path: str, flag: str, fix: str) -> None:
    """``path``, given as ``flag``, is a readable checkpoint file, or one line naming ``fix``."""
    if os.path.islink(path) and not os.path.exists(path):
        raise FairseqExtError(
            f"{flag} {path} is a link to {os.readlink(path)}, which does not exist; {fix}"
        )
    if os.path.isdir(path):
        raise FairseqExtError(
            f"{flag} {path} is a folder, not a checkpoint file; {listing(path)}{fix}"
        )
    require_readable_file(path, flag, f"{listing(os.path.dirname(path))}{fix}")


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


def _init_checkpoints(cfg) -> dict[str, str]:
    """``{flag: path}`` of every ``--init-from`` / ``--init-*-from`` given (a task or model option;
    every option where ``cfg`` is flat)."""
    sections = [cfg] if isinstance(cfg, Namespace) else [cfg.get("task"), cfg.get("model")]
    found = {}
    for options in (vars(s) if isinstance(s, Namespace) else s for s in sections if s is not None):
        for name in list(options.keys()):  # only these are read: another may be a missing value
            if re.fullmatch(r"init_(\w+_)?from", name) and options.get(name):
                found[f"--{name.replace('_', '-')}"] = str(options.get(name))
    return found


def check_training_start(cfg) -> None:
    """What fairseq-train starts from: every ``--init-*-from``; ``--restore-file``,
    ``--finetune-from-model`` and ``--continue-once`` where fairseq reads them (on a first start);
    the ``checkpoint_last.pt`` of ``--save-dir``. Sharded checkpoints are left to fairseq."""
    sharded = option(cfg, "distributed_training", "use_sharded_state")
    if sharded or (option(cfg, "common", "model_parallel_size") or 1) > 1:
        return
    for flag, path in _init_checkpoints(cfg).items():
        if "://" not in path:
            part = flag[len("--init-") : -len("-from")] or "model"
            fix = f"give the fairseq checkpoint file to start the {part} from"
            require_checkpoint_file(path, flag, fix)
    save_dir = str(option(cfg, "checkpoint", "save_dir"))
    restore = str(option(cfg, "checkpoint", "restore_file") or DEFAULT_RESTORE)
    finetune = option(cfg, "checkpoint", "finetune_from_model")
    suffix = option(cfg, "checkpoint", "checkpoint_suffix") or ""
    if restore != DEFAULT_RESTORE:
        if finetune:
            raise FairseqExtError(
                f"--finetune-from-model {finetune} starts a new training from a model and "
                f"--restore-file {restore} resumes one: give one of them"
            )
        path = restore.replace(".pt", f"{suffix}.pt")
        in_save_dir = os.path.join(save_dir, path)
        misplaced = not os.path.isabs(path) and not os.path.lexists(path)
        fix = (
            f"--restore-file is read from the current folder, not from --save-dir: give "
            f"{in_save_dir}"
            if misplaced and os.path.isfile(in_save_dir)
            else "give the checkpoint file to resume from (one fairseq-train wrote), or leave "
            f"--restore-file out to resume --save-dir's {DEFAULT_RESTORE}"
        )
        if "://" not in path:
            require_checkpoint_file(path, "--restore-file", f"{fix}; {NOTHING_TRAINED}")
        return
    if "://" in save_dir:
        return
    last = os.path.join(save_dir, f"checkpoint_last{suffix}.pt")
    check_checkpoint_last(save_dir, last)
    if os.path.exists(last) or newest_complete_checkpoint(save_dir):  # a resume (restore_last)
        return
    starts = (  # fairseq starts a new training from the first given
        ("--continue-once", option(cfg, "checkpoint", "continue_once"), "to continue from"),
        ("--finetune-from-model", finetune, "of the model to fine-tune"),
    )
    given = [(flag, str(path), what) for flag, path, what in starts if path]
    if given and "://" not in given[0][1]:
        flag, path, what = given[0]
        require_checkpoint_file(path, flag, f"give the checkpoint file {what}; {NOTHING_TRAINED}")


def _as_dict(options: Any) -> Optional[dict]:
    if isinstance(options, Namespace):
        return vars(options)
    return dict(options.items()) if hasattr(options, "items") else None


def _trained_options(path: str) -> Optional[dict]:
    """The model options saved in checkpoint ``path`` (weights unread), or None."""
    import torch

    from fairseq_ext.checkpoints.loading import SAFE_CHECKPOINT_GLOBALS

    torch.serialization.add_safe_globals(list(SAFE_CHECKPOINT_GLOBALS))
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # corrupt, foreign, legacy format: refused with its reason when loaded
        return None
    if not isinstance(state, dict):
        return None
    cfg = _as_dict(state.get("cfg")) or {}
    return _as_dict(cfg.get("model")) or _as_dict(state.get("args"))


def _plain(value: Any) -> Any:
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(value, (DictConfig, ListConfig)):
        value = OmegaConf.to_container(value)
    return list(value) if isinstance(value, tuple) else value


def _flag(name: str, value: Any) -> str:
    flag = f"--{name.replace('_', '-')}"
    if value is True:
        return flag
    return f"no {flag}" if value is False or value is None else f"{flag} {value}"


def check_same_model(save_dir: str, path: str, given: Any) -> None:
    """Refuse a resume of ``save_dir`` with other model options (those of the model class of
    ``--arch``, but ``FREE_ON_RESUME``) than it was trained with."""
    from fairseq.models import ARCH_MODEL_REGISTRY

    trained, given = _trained_options(path), _as_dict(given)
    if trained is None or given is None:
        return
    arch = given.get("arch") or given.get("_name")
    old_arch = trained.get("arch") or trained.get("_name")
    differ = [("arch", old_arch, arch)] if old_arch != arch else []
    names = set()
    if arch in ARCH_MODEL_REGISTRY:
        parser = argparse.ArgumentParser(add_help=False)
        ARCH_MODEL_REGISTRY[arch].add_args(parser)
        names = set(vars(parser.parse_known_args([])[0])) - FREE_ON_RESUME
    for name in sorted(names & set(trained) & set(given)):
        if _plain(trained[name]) != _plain(given[name]):
            differ.append((name, trained[name], given[name]))
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


def stop_if_spent(cfg, trainer, extra_state, epoch_itr) -> None:
    """End the run (status 0, one line) when the checkpoint it resumed is at ``--max-update`` or
    past ``--max-epoch``."""
    if extra_state is None:
        return
    optimization = trainer.cfg.optimization
    updates, epoch = trainer.get_num_updates(), epoch_itr.next_epoch_idx
    if optimization.max_update > 0 and updates >= optimization.max_update:
        why = f"is at update {updates}, and --max-update is {optimization.max_update}"
    elif optimization.max_epoch > 0 and epoch > optimization.max_epoch:
        why = f"has finished epoch {epoch - 1}, and --max-epoch is {optimization.max_epoch}"
    else:
        return
    if trainer.data_parallel_rank == 0:
        path = cfg.restore_file
        if path == DEFAULT_RESTORE:
            path = os.path.join(
                cfg.save_dir, f"checkpoint_last{trainer.checkpoint_suffix or ''}.pt"
            )
        note(
            f"{path} {why}: nothing to train; the checkpoints in {cfg.save_dir} are left as they "
            "are (give a larger --max-update or --max-epoch to train on)"
        )
    raise SystemExit(0)

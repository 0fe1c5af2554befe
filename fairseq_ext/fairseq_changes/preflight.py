"""Every path a command of the plugin is given, checked before any work starts
(``fairseq_ext.common.paths`` says how): before a model is built, a folder made or a line read,
one line names the path, what is wrong and the fix.

* ``--path``: each ``:``-separated checkpoint is a readable file (a missing one is named with the
  checkpoints its folder holds);
* the data folder (each ``:``-separated one): a readable folder, its ``dict.txt`` / ``dict.*.txt``
  readable, not cut short, no token twice and no line without its count; for a
  sequence-to-sequence task, each split the command reads with both sides of its pair;
* ``--input`` of ``fairseq-interactive`` (unless ``-``, standard input): a readable file;
* ``--results-path`` of ``fairseq-generate`` and ``--save-dir`` of ``fairseq-train``: a folder, or
  one that can be made, that takes files;
* ``--sentencepiece-model`` (``--bpe sentencepiece``): a readable file;
* what ``fairseq-train`` starts from (``check_training_start``): ``--restore-file``,
  ``--finetune-from-model``, ``--continue-once`` and every ``--init-*-from`` a readable checkpoint
  file, the ``checkpoint_last.pt`` of ``--save-dir`` no dangling link or folder
  (``fairseq_ext.checkpoints.resuming``; its model options are compared once the model is built,
  ``checkpoints.saving``).

``--seed`` is checked for every command (``check_seed``), and ``--model-overrides`` of
``fairseq-generate`` and ``fairseq-interactive``: a Python literal dict (``model_overrides``),
before fairseq's ``ast.literal_eval`` reads it.

``fairseq_changes`` wraps where fairseq's commands start, with the command's configuration at
hand: ``fairseq_cli.generate.main(cfg)`` (``checking_generate``) and
``distributed_utils.call_main(cfg, main)`` (``checking_call_main``: train, hydra-train once the
plugin is loaded, interactive, validate; before any worker is spawned). Each says which task the
command serves (``patch_scope.serving``) and, for the plugin's tasks, runs ``check_command``;
fairseq-generate's results file is then written whole or not at all
(``output_files.generating_exclusively``). ``fairseq_ext.hub`` runs ``check_model_folder``.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from argparse import Namespace
from typing import Any, Optional

from fairseq_ext.checkpoints import resuming
from fairseq_ext.checkpoints.saving import newest_complete_checkpoint
from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.common.paths import (
    require_readable_file,
    require_readable_folder,
    require_writable_folder,
)
from fairseq_ext.fairseq_changes import patch_scope
from fairseq_ext.fairseq_changes.model_overrides import literal_overrides
from fairseq_ext.fairseq_changes.output_files import generating_exclusively

DEFAULT_RESTORE = "checkpoint_last.pt"  # fairseq's --restore-file: that of --save-dir
# fairseq seeds numpy with --seed plus the epoch, and numpy takes 0 to 2**32 - 1
MAX_SEED = 2**31 - 1
# the folder a command writes: (option group, option, flag, what it writes there)
WRITES = {
    "generate": ("common_eval", "results_path", "--results-path", "results"),
    "train": ("checkpoint", "save_dir", "--save-dir", "checkpoints"),
}


def _option(cfg, group: str, name: str) -> Any:
    """An option of a command's configuration: an ``argparse.Namespace`` (flat) or fairseq's
    ``DictConfig`` (in groups)."""
    if isinstance(cfg, Namespace):
        return getattr(cfg, name, None)
    section = cfg.get(group) if hasattr(cfg, "get") else getattr(cfg, group, None)
    return None if section is None else section.get(name, None)


def _local_paths(paths: Optional[str]) -> list[str]:
    """The ``:``-separated paths of an option, without URLs (fairseq's ``file_io`` reads those)."""
    from fairseq import utils

    return [p for p in utils.split_paths(str(paths)) if "://" not in p] if paths else []


def _checkpoints_beside(path: str) -> str:
    listed = resuming.listing(os.path.dirname(path))
    either = "one of them, or " if listed else ""
    return f"{listed}give --path {either}a checkpoint file fairseq-train wrote"


def check_checkpoint(path: str) -> None:
    """A checkpoint of ``--path`` is a readable file; a missing one is named with the checkpoints
    beside it."""
    from fairseq_ext.checkpoints.allow_list import require_file

    require_file(path, _checkpoints_beside(path))


def _splits_read(cfg, command: str) -> list[str]:
    """The splits ``command`` reads: ``--gen-subset`` (generate), ``--train-subset`` and
    ``--valid-subset`` (train; validate: ``--valid-subset``)."""
    if command == "generate":
        return [str(_option(cfg, "dataset", "gen_subset"))]
    valid = str(_option(cfg, "dataset", "valid_subset") or "").split(",")
    if command == "train":
        skip = _option(cfg, "dataset", "disable_validation")
        return [str(_option(cfg, "dataset", "train_subset"))] + ([] if skip else valid)
    return valid if command == "validate" else []


def check_split_sides(cfg, command: str) -> None:
    """For a sequence-to-sequence task (a ``TranslationTask``), every split the command reads
    has both sides of the pair whole (``data.folder_checks.refuse_half_made_pair``): a killed
    fairseq-preprocess leaves a split without its target side."""
    from fairseq.tasks import TASK_REGISTRY
    from fairseq.tasks.translation import TranslationTask

    from fairseq_ext.data import folder_checks  # fairseq: imported once a command runs

    task = TASK_REGISTRY.get(patch_scope.task_of_cfg(cfg))
    if task is None or not issubclass(task, TranslationTask):
        return
    source, target = _option(cfg, "task", "source_lang"), _option(cfg, "task", "target_lang")
    for folder in _local_paths(_option(cfg, "task", "data")):
        for split in filter(None, _splits_read(cfg, command)):
            folder_checks.refuse_half_made_pair(folder, split, source, target)


def check_sentencepiece_model(path: Optional[str]) -> None:
    """``--bpe sentencepiece`` has a ``--sentencepiece-model`` that is a readable file (what is in
    it is sentencepiece's to read)."""
    fix = (
        "give the spm.model the data was encoded with (data_prep/spm.py train writes PREFIX.model)"
    )
    if path in (None, "???"):  # fairseq's mark of an option not given
        raise FairseqExtError(f"--bpe sentencepiece needs --sentencepiece-model PATH; {fix}")
    if "://" not in str(path):
        require_readable_file(str(path), "--sentencepiece-model", fix)


def check_seed(seed: Any) -> None:
    """``--seed`` is one numpy and fairseq take for every epoch (numpy refuses a seed outside
    0 to 2**32 - 1, and fairseq adds the epoch to it)."""
    if seed is not None and not 0 <= int(seed) <= MAX_SEED:
        raise FairseqExtError(
            f"--seed {seed} is out of range: give a whole number from 0 to {MAX_SEED} (fairseq "
            "seeds numpy with it plus the epoch number, and numpy takes 0 to 2**32 - 1)"
        )


def _start_checkpoints(cfg) -> dict[str, str]:
    """``{flag: path}`` of every ``--init-from`` / ``--init-*-from`` given (a task or model option;
    every option where ``cfg`` is flat): a checkpoint whose weights start the model, or a part."""
    sections = [cfg] if isinstance(cfg, Namespace) else [cfg.get("task"), cfg.get("model")]
    found = {}
    for options in (vars(s) if isinstance(s, Namespace) else s for s in sections if s is not None):
        for name in list(options.keys()):  # only these are read: another may be a missing value
            if re.fullmatch(r"init_(\w+_)?from", name) and options.get(name):
                found[f"--{name.replace('_', '-')}"] = str(options.get(name))
    return found


def check_training_start(cfg) -> None:
    """What fairseq-train starts from: ``--restore-file``, ``--finetune-from-model`` and
    ``--continue-once`` (where fairseq reads them: on a first start), every ``--init-*-from`` and
    the ``checkpoint_last.pt`` of ``--save-dir`` (``checkpoints.resuming``). Sharded checkpoints
    (one file per rank) are left to fairseq."""
    if (
        _option(cfg, "distributed_training", "use_sharded_state")
        or (_option(cfg, "common", "model_parallel_size") or 1) > 1
    ):
        return
    for flag, path in _start_checkpoints(cfg).items():
        if "://" not in path:
            part = flag[len("--init-") : -len("-from")] or "model"
            resuming.require_checkpoint_file(
                path, flag, f"give the fairseq checkpoint file to start the {part} from"
            )
    save_dir = str(_option(cfg, "checkpoint", "save_dir"))
    restore = str(_option(cfg, "checkpoint", "restore_file") or DEFAULT_RESTORE)
    finetune = _option(cfg, "checkpoint", "finetune_from_model")
    suffix = _option(cfg, "checkpoint", "checkpoint_suffix") or ""
    if restore != DEFAULT_RESTORE:
        if finetune:
            raise FairseqExtError(
                f"--finetune-from-model {finetune} starts a new training from a model and "
                f"--restore-file {restore} resumes one: give one of them"
            )
        path = restore.replace(".pt", f"{suffix}.pt")
        in_save_dir = os.path.join(save_dir, path)
        fix = (
            f"--restore-file is read from the current folder, not from --save-dir: give "
            f"{in_save_dir}"
            if not os.path.isabs(path) and not os.path.lexists(path) and os.path.isfile(in_save_dir)
            else "give the checkpoint file to resume from (one fairseq-train wrote), or leave "
            f"--restore-file out to resume --save-dir's {DEFAULT_RESTORE}"
        )
        if "://" not in path:
            resuming.require_checkpoint_file(
                path, "--restore-file", f"{fix}; {resuming.NOTHING_TRAINED}"
            )
        return
    if "://" in save_dir:
        return
    last = os.path.join(save_dir, f"checkpoint_last{suffix}.pt")
    resuming.check_checkpoint_last(save_dir, last)
    if os.path.exists(last) or newest_complete_checkpoint(save_dir):  # a resume (restore_last)
        return
    starts = [  # fairseq starts a new training from the first given
        (flag, str(path), what)
        for flag, path, what in (
            (
                "--continue-once",
                _option(cfg, "checkpoint", "continue_once"),
                "the checkpoint file to continue from",
            ),
            ("--finetune-from-model", finetune, "the checkpoint file of the model to fine-tune"),
        )
        if path
    ]
    if starts and "://" not in starts[0][1]:
        flag, path, what = starts[0]
        resuming.require_checkpoint_file(path, flag, f"give {what}; {resuming.NOTHING_TRAINED}")


def check_command(cfg, command: str) -> None:
    """Every path of ``cfg`` that fairseq's ``command`` (``generate``, ``interactive``, ``train``,
    ``validate``) reads or writes, before it does, and ``--seed``; for ``train`` also what the
    training starts from (``check_training_start``)."""
    from fairseq_ext.data import folder_checks  # fairseq: imported once a command runs

    check_seed(_option(cfg, "common", "seed"))
    for folder in _local_paths(_option(cfg, "task", "data")):
        folder_checks.check_data_folder(folder)
    check_split_sides(cfg, command)
    for path in _local_paths(_option(cfg, "common_eval", "path")):
        check_checkpoint(path)
    source = _option(cfg, "interactive", "input")
    if command == "interactive" and source and source != "-":
        require_readable_file(
            source, "--input", "give the text file to translate, or - for standard input"
        )
    if command in WRITES:
        group, name, flag, what = WRITES[command]
        for folder in _local_paths(_option(cfg, group, name)):
            require_writable_folder(folder, flag, what)
    bpe = getattr(cfg, "bpe", None) if isinstance(cfg, Namespace) else _option(cfg, "bpe", "_name")
    if bpe == "sentencepiece":
        check_sentencepiece_model(_option(cfg, "bpe", "sentencepiece_model"))
    overrides = _option(cfg, "common_eval", "model_overrides")
    if command in ("generate", "interactive") and overrides is not None:
        literal_overrides(overrides)
    if command == "train":
        check_training_start(cfg)


def check_model_folder(
    folder: str, data_folder: str, fix: str = "give the folder that holds the checkpoint"
) -> None:
    """``fairseq_ext.hub.from_pretrained``'s folder and the folder of its dictionaries; ``fix``:
    what the error for a missing folder tells the user to give instead."""
    from fairseq_ext.data import folder_checks  # fairseq: imported once a command runs

    require_readable_folder(folder, "model folder", fix)
    folder_checks.check_data_folder(data_folder, "dictionary folder")


def _command_of(main) -> str:
    """``train`` for ``fairseq_cli.train.main``, also where that module runs as ``__main__``."""
    spec = getattr(sys.modules.get(main.__module__), "__spec__", None)
    return (getattr(spec, "name", None) or main.__module__).rsplit(".", 1)[-1]


def checking_generate(main):
    """``fairseq_cli.generate.main(cfg)`` serving ``cfg``'s task; for the plugin's tasks
    ``check_command`` first, and the results file written whole (``generating_exclusively``)."""

    @functools.wraps(main)
    def checked_main(cfg):
        task = patch_scope.task_of_cfg(cfg)
        with patch_scope.serving(task):
            if not patch_scope.serves(task):
                return main(cfg)
            check_command(cfg, "generate")
            return generating_exclusively(main, cfg)

    return checked_main


def checking_call_main(call_main):
    """``distributed_utils.call_main(cfg, main)``, which fairseq-train, -interactive and -validate
    start with, serving ``cfg``'s task (also in the ranks it spawns: ``patch_scope.ForTask``); for
    the plugin's tasks ``check_command`` for the command of ``main`` first, before any worker is
    spawned."""

    @functools.wraps(call_main)
    def checked_call_main(cfg, main, **kwargs):
        task = patch_scope.task_of_cfg(cfg)
        with patch_scope.serving(task):
            if patch_scope.serves(task):
                check_command(cfg, _command_of(main))
            return call_main(cfg, patch_scope.ForTask(main, task), **kwargs)

    return checked_call_main

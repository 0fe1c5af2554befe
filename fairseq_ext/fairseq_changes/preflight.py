"""The ``checked-paths``, ``checked-paths-generate`` and ``interactive-utf8`` rows: every path a
command of the plugin is given, ``--seed`` and ``--model-overrides`` checked before any work
(``check_command``), each problem one line naming the path or option and the fix."""

from __future__ import annotations

import ast
import functools
import os
import sys
from argparse import Namespace
from typing import Any, Optional

from fairseq_ext.checkpoints import resuming
from fairseq_ext.checkpoints.checks import option
from fairseq_ext.checkpoints.loading import require_file
from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.common.paths import (
    require_readable_file,
    require_readable_folder,
    require_writable_folder,
)
from fairseq_ext.fairseq_changes import patch_scope
from fairseq_ext.fairseq_changes.output_files import generating_exclusively

# fairseq seeds numpy with --seed plus the epoch, and numpy takes 0 to 2**32 - 1
MAX_SEED = 2**31 - 1
# the folder a command writes: (option group, option, flag, what it writes there)
WRITES = {
    "generate": ("common_eval", "results_path", "--results-path", "results"),
    "train": ("checkpoint", "save_dir", "--save-dir", "checkpoints"),
}
OVERRIDES_EXAMPLE = "\"{'iter_decode_max_iter': 4}\""


def _local_paths(paths: Optional[str]) -> list[str]:
    """The ``:``-separated paths of an option, without URLs (fairseq's ``file_io`` reads those)."""
    from fairseq import utils

    return [p for p in utils.split_paths(str(paths)) if "://" not in p] if paths else []


def _splits_read(cfg, command: str) -> list[str]:
    """``--gen-subset`` (generate), ``--train-subset`` and ``--valid-subset`` (train; validate:
    ``--valid-subset``)."""
    if command == "generate":
        return [str(option(cfg, "dataset", "gen_subset"))]
    valid = str(option(cfg, "dataset", "valid_subset") or "").split(",")
    if command == "train":
        skip = option(cfg, "dataset", "disable_validation")
        return [str(option(cfg, "dataset", "train_subset"))] + ([] if skip else valid)
    return valid if command == "validate" else []


def check_split_sides(cfg, command: str) -> None:
    """For a ``TranslationTask``, every split the command reads has both sides of the pair whole
    (a killed fairseq-preprocess leaves a split without its target side)."""
    from fairseq.tasks import TASK_REGISTRY
    from fairseq.tasks.translation import TranslationTask

    from fairseq_ext.data import folder_checks  # fairseq: imported once a command runs

    task = TASK_REGISTRY.get(patch_scope.task_of_cfg(cfg))
    if task is None or not issubclass(task, TranslationTask):
        return
    source, target = option(cfg, "task", "source_lang"), option(cfg, "task", "target_lang")
    for folder in _local_paths(option(cfg, "task", "data")):
        for split in filter(None, _splits_read(cfg, command)):
            folder_checks.refuse_half_made_pair(folder, split, source, target)


def check_sentencepiece_model(path: Optional[str]) -> None:
    """``--bpe sentencepiece`` has a ``--sentencepiece-model`` that is a readable file."""
    fix = (
        "give the spm.model the data was encoded with (data_prep/spm.py train writes PREFIX.model)"
    )
    if path in (None, "???"):  # fairseq's mark of an option not given
        raise FairseqExtError(f"--bpe sentencepiece needs --sentencepiece-model PATH; {fix}")
    if "://" not in str(path):
        require_readable_file(str(path), "--sentencepiece-model", fix)


def check_seed(seed: Any) -> None:
    """``--seed`` plus any epoch is a seed numpy takes."""
    if seed is not None and not 0 <= int(seed) <= MAX_SEED:
        raise FairseqExtError(
            f"--seed {seed} is out of range: give a whole number from 0 to {MAX_SEED} (fairseq "
            "seeds numpy with it plus the epoch number, and numpy takes 0 to 2**32 - 1)"
        )


def literal_overrides(text: str) -> dict:
    """``--model-overrides`` as fairseq reads it (``ast.literal_eval``): the dict ``text`` writes,
    or one line saying why there is none (its keys and values are checked against the checkpoint
    when it loads, ``checkpoints.checks.check_model_overrides``)."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        raise FairseqExtError(
            f"--model-overrides {text!r} is not a Python literal ({type(exc).__name__}); give a "
            "dict of plain values (numbers, strings, True/False, None; no calls such as "
            f"float('nan')), e.g. {OVERRIDES_EXAMPLE}"
        ) from None
    if not isinstance(value, dict):
        raise FairseqExtError(
            f"--model-overrides must be a dict, e.g. {OVERRIDES_EXAMPLE}; got a "
            f"{type(value).__name__}"
        )
    return value


def check_command(cfg, command: str) -> None:
    """Every path of ``cfg`` that fairseq's ``command`` (``generate``, ``interactive``, ``train``,
    ``validate``) reads or writes, before it does, ``--seed`` and ``--model-overrides``; for
    ``train`` also what the training starts from."""
    from fairseq_ext.data import folder_checks  # fairseq: imported once a command runs

    check_seed(option(cfg, "common", "seed"))
    for folder in _local_paths(option(cfg, "task", "data")):
        folder_checks.check_data_folder(folder)
    check_split_sides(cfg, command)
    for path in _local_paths(option(cfg, "common_eval", "path")):
        listed = resuming.listing(os.path.dirname(path))
        either = "one of them, or " if listed else ""
        require_file(path, f"{listed}give --path {either}a checkpoint file fairseq-train wrote")
    source = option(cfg, "interactive", "input")
    if command == "interactive" and source and source != "-":
        fix = "give the text file to translate, or - for standard input"
        require_readable_file(source, "--input", fix)
    if command in WRITES:
        group, name, flag, what = WRITES[command]
        for folder in _local_paths(option(cfg, group, name)):
            require_writable_folder(folder, flag, what)
    bpe = getattr(cfg, "bpe", None) if isinstance(cfg, Namespace) else option(cfg, "bpe", "_name")
    if bpe == "sentencepiece":
        check_sentencepiece_model(option(cfg, "bpe", "sentencepiece_model"))
    overrides = option(cfg, "common_eval", "model_overrides")
    if command in ("generate", "interactive") and overrides is not None:
        literal_overrides(overrides)
    if command == "train":
        resuming.check_training_start(cfg)


def check_model_folder(
    folder: str, data_folder: str, fix: str = "give the folder that holds the checkpoint"
) -> None:
    """``fairseq_ext.hub.from_pretrained``'s folder and the folder of its dictionaries; ``fix``:
    what the error for a missing folder tells the user to give instead."""
    from fairseq_ext.data import folder_checks  # fairseq: imported once a command runs

    require_readable_folder(folder, "model folder", fix)
    folder_checks.check_data_folder(data_folder, "dictionary folder")


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
    """``distributed_utils.call_main(cfg, main)`` (fairseq-train, -interactive, -validate)
    serving ``cfg``'s task, also in the ranks it spawns; for the plugin's tasks ``check_command``
    for the command of ``main`` (``fairseq_cli.train.main``: ``train``, also run as ``__main__``)
    before any worker is spawned."""

    @functools.wraps(call_main)
    def checked_call_main(cfg, main, **kwargs):
        task = patch_scope.task_of_cfg(cfg)
        with patch_scope.serving(task):
            if patch_scope.serves(task):
                spec = getattr(sys.modules.get(main.__module__), "__spec__", None)
                command = (getattr(spec, "name", None) or main.__module__).rsplit(".", 1)[-1]
                check_command(cfg, command)
            return call_main(cfg, patch_scope.ForTask(main, task), **kwargs)

    return checked_call_main


def utf8_input(buffered_read):
    """fairseq-interactive's ``buffered_read`` naming a line that is not UTF-8 by file and line
    (``data.interactive_input.buffered_read``)."""
    from fairseq_ext.data.interactive_input import buffered_read as naming_bad_lines

    return naming_bad_lines

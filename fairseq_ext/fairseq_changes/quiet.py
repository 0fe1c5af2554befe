"""What the commands print (docs/output.md): ``hush()`` keeps the progress lines, ``RESULTS``, every
warning and the plugin's messages, and drops fairseq's and Hydra's noise. The rows
``quiet-commands`` and ``quiet-setup`` apply it to the plugin's tasks, ``hush_command`` to the
plugin's own command lines, the hub to ``from_pretrained`` (``verbose=True`` keeps everything)."""

from __future__ import annotations

import functools
import logging
import os
import warnings

from fairseq_ext.fairseq_changes import patch_scope
from fairseq_ext.fairseq_changes.patch_scope import YES

LOGGERS = ("fairseq", "fairseq_cli", "hydra")
PROGRESS = "fairseq.logging.progress_bar"  # logs as train_inner, train, valid
RESULTS = {  # logger: the start of each INFO message kept
    "fairseq_cli.train": ("num. shared model params", "done training", "early stop"),
    "fairseq.trainer": ("Loaded checkpoint",),
    "fairseq.checkpoint_utils": ("Saved checkpoint", "loading pretrained model from"),
    "fairseq_cli.generate": ("Translated ",),
    "fairseq_cli.interactive": ("Type the input", "Total time"),
}
# the start of each message (Python's warnings filters match there), case-insensitive
NOISE = (
    r"hydra\.experimental\.\w+\(\) is no longer experimental",
    r"\s*The version_base parameter is not specified",
    r"In '[^']*': Usage of deprecated keyword in package header",
    r"\s*'[^']*' is validated against ConfigStore schema",
    r"\s*The strict flag in the compose API is deprecated",
    r"'pin_memory' argument is set as true but no accelerator is found",
)
# "1": everything, as --verbose (set by ``quiet_commands`` for the processes a command starts)
VERBOSE_ENV = "FAIRSEQ_EXT_VERBOSE"
VERBOSE_HELP = (
    "show fairseq's whole log (configuration, model, set-up) and Hydra's and torch's "
    "deprecation warnings (hidden by default)"
)
_chosen: list[bool] = []  # the verbose of the last hush(): --verbose parsed, the hub's verbose=


def _keep_results(record: logging.LogRecord) -> bool:
    """Below WARNING, only the messages ``RESULTS`` names for the record's logger."""
    return record.levelno >= logging.WARNING or record.getMessage().startswith(
        RESULTS.get(record.name, ())
    )


def hush(verbose: bool = False) -> None:
    """Unless ``verbose``: log records of ``LOGGERS`` below WARNING, but for the progress lines and
    ``RESULTS``, and the warnings of ``NOISE`` are dropped from now on. ``hush(True)`` brings them
    back."""
    _chosen[:] = [verbose]
    for name in LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET if verbose else logging.WARNING)
    # LOGLEVEL=WARNING holds
    kept = logging.NOTSET if verbose else max(logging.INFO, logging.getLogger().level)
    for name in (PROGRESS, *RESULTS):
        logger = logging.getLogger(name)
        logger.setLevel(kept)
        logger.removeFilter(_keep_results)
        if not verbose and name in RESULTS:
            logger.addFilter(_keep_results)
    warnings.filters[:] = [f for f in warnings.filters if f[1] is None or f[1].pattern not in NOISE]
    if not verbose:
        for message in NOISE:
            warnings.filterwarnings("ignore", message=message)


def verbose_asked() -> bool:
    """Whether the last ``hush()`` of this process was ``hush(True)`` (``--verbose``, the hub's
    ``verbose=True``) or ``FAIRSEQ_EXT_VERBOSE=1`` is set."""
    return (_chosen or [False])[-1] or os.environ.get(VERBOSE_ENV, "").strip().lower() in YES


def quiet_commands(parse_args_and_arch):
    """The ``quiet-commands`` row: fairseq's option parser, then, for a command of a task the
    change serves, ``hush()`` unless ``--verbose`` (which the processes it starts inherit)."""

    @functools.wraps(parse_args_and_arch)
    def parse(*args, **kwargs):
        parsed = parse_args_and_arch(*args, **kwargs)
        options = parsed[0] if isinstance(parsed, tuple) else parsed
        task = getattr(options, "task", None)
        if task is not None and patch_scope.serves(task):
            if getattr(options, "verbose", False):
                os.environ[VERBOSE_ENV] = "1"
            hush(verbose=verbose_asked())
        return parsed

    return parse


def quiet_setup(setup_task):
    """The ``quiet-setup`` row: ``fairseq.tasks.setup_task`` after ``hush()`` unless verbose."""

    @functools.wraps(setup_task)
    def quiet_setup_task(cfg, **kwargs):
        hush(verbose=verbose_asked())
        return setup_task(cfg, **kwargs)

    return quiet_setup_task


def setup_served(cfg, **kwargs) -> bool:
    """Whether ``setup_task(cfg)`` serves: ``cfg`` is a task's config (its ``_name``) or a
    command's (its ``task``)."""
    name = getattr(cfg, "task", None)
    return patch_scope.serves(name if isinstance(name, str) else getattr(cfg, "_name", None))


def hush_command(argv: list[str]) -> None:
    """``hush()`` for a command line of the plugin (``argv``), before it imports fairseq: kept
    loud by ``--verbose`` among ``argv`` or by ``FAIRSEQ_EXT_VERBOSE=1``."""
    hush(verbose="--verbose" in argv or verbose_asked())

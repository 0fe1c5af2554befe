"""Quiet by default: fairseq's and Hydra's noise off, the user's results and the plugin's messages on.

Importing fairseq logs at INFO (``Please install tensorboardX``; one of its modules runs
``logging.basicConfig(level=DEBUG)``), each batch iterator logs four INFO lines, fairseq's
Hydra calls raise five deprecation warnings per configuration and its data loader torch's
``pin_memory`` warning on CPU. ``hush()`` drops them for the rest of the process: the plugin's
command lines call it before they import fairseq (``--verbose`` keeps them), the hub API's
``from_pretrained`` when it loads (``verbose=True`` keeps them). fairseq's own command lines are
left as they are: they show their log, and the plugin adds no warning of its own to them."""
from __future__ import annotations

import logging
import sys
import warnings

LOGGERS = ("fairseq", "fairseq_cli", "hydra")
# the start of each message (Python's warnings filters match there), case-insensitive
NOISE = (
    r"hydra\.experimental\.\w+\(\) is no longer experimental",
    r"\s*The version_base parameter is not specified",
    r"In '[^']*': Usage of deprecated keyword in package header",
    r"\s*'[^']*' is validated against ConfigStore schema",
    r"\s*The strict flag in the compose API is deprecated",
    r"'pin_memory' argument is set as true but no accelerator is found",
)
VERBOSE_HELP = "show fairseq's INFO log and Hydra's and torch's deprecation warnings (hidden by default)"


def _ours(entry: tuple) -> bool:
    return entry[1] is not None and entry[1].pattern in NOISE


def hush(verbose: bool = False) -> None:
    """Unless ``verbose``: log records of ``LOGGERS`` below WARNING and the warnings of
    ``NOISE`` are dropped from now on. ``hush(True)`` brings them back."""
    for name in LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET if verbose else logging.WARNING)
    warnings.filters[:] = [entry for entry in warnings.filters if not _ours(entry)]
    if not verbose:
        for message in NOISE:
            warnings.filterwarnings("ignore", message=message)


def hush_command() -> None:
    """``hush()`` for a command line, before it imports fairseq: kept loud by ``--verbose``
    among its arguments (its parser accepts the flag, with ``VERBOSE_HELP``)."""
    hush(verbose="--verbose" in sys.argv[1:])

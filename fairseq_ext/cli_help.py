"""``--help`` after the options of ``--task``, ``--arch`` and ``--criterion`` are known.

fairseq 0.12's ``options.parse_args_and_arch`` parses twice: the first pass finds the task, the
architecture and the other registry choices, then their ``add_args`` add their options and the
second pass parses them. ``-h`` acts in the first pass, so ``fairseq-train --task cmlm_hybrid
--arch hi_cmlm_transformer_tiny --help`` listed none of them (fairseq's own models and tasks
neither). ``fairseq_patches`` wraps it (``help_after_first_pass``): with ``-h``/``--help``, the first pass runs without it and the
help is printed where the second pass would begin, every added option in it with its default
(a model's: its architecture's, which fairseq applies after parsing)."""
from __future__ import annotations

import argparse
import sys

from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY

HELP = ("-h", "--help")


def _architecture_defaults(argv: list[str]) -> dict:
    """The values ``--arch``'s function gives the model options left unset, then its model's
    dataclass defaults (fairseq's order)."""
    finder = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    finder.add_argument("--arch", "-a")
    arch = finder.parse_known_args(argv)[0].arch
    if arch not in ARCH_CONFIG_REGISTRY:
        return {}
    args = argparse.Namespace()
    ARCH_CONFIG_REGISTRY[arch](args)
    config = getattr(ARCH_MODEL_REGISTRY[arch], "__dataclass", None)
    defaults = {**(vars(config()) if config is not None else {}), **vars(args)}
    return {k: v for k, v in defaults.items() if not (isinstance(v, str) and v.startswith("${"))}


def _print_help(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    defaults = _architecture_defaults(argv)
    for action in parser._actions:  # a model's options carry no default: the architecture sets them
        if action.default is argparse.SUPPRESS and action.dest in defaults:
            action.default = defaults[action.dest]
    parser.formatter_class = argparse.ArgumentDefaultsHelpFormatter
    parser.print_help()


def help_after_first_pass(original):
    def parse_args_and_arch(parser, input_args=None, parse_known=False, suppress_defaults=False,
                            modify_parser=None):
        argv = list(sys.argv[1:] if input_args is None else input_args)
        if not any(a in HELP for a in argv):
            return original(parser, input_args, parse_known, suppress_defaults, modify_parser)
        passes = []

        def print_help_before_second_pass(p):
            if modify_parser is not None:
                modify_parser(p)
            passes.append(p)
            if len(passes) == 2:  # every option added: fairseq calls it again before parsing them
                _print_help(p, argv)
                p.exit()

        without_help = [a for a in argv if a not in HELP]
        try:
            return original(parser, without_help, parse_known, False, print_help_before_second_pass)
        except RuntimeError:  # no --arch: fairseq finds no model to add options of, and stops
            if len(passes) != 1:
                raise
            _print_help_without_arch(passes[0], without_help)

    return parse_args_and_arch


def _print_help_without_arch(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """The help of a command without ``--arch``: the options of its task and criterion (which
    fairseq's second pass would add), a line saying that ``--arch`` adds the model's."""
    from fairseq.tasks import TASK_REGISTRY

    args, _ = parser.parse_known_args(argv)
    if getattr(args, "task", None) in TASK_REGISTRY:
        TASK_REGISTRY[args.task].add_args(parser)
    _print_help(parser, argv)
    print("\nThe model's options are listed with --arch ARCH (the architectures: the --arch choices above).")
    parser.exit()

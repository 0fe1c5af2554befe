"""The ``help-after-options`` row: ``--help`` printed after the options of ``--task``, ``--arch``
and ``--criterion`` are added (fairseq 0.12 answers it in its first pass, before them), and a
registry option naming nothing registered answered with one line and the closest name."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import sys
from typing import Iterator, Optional

from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY

from fairseq_ext.fairseq_changes import patch_scope

HELP = ("-h", "--help")
REGISTRY_OPTIONS = ("--task", "--arch", "--criterion")  # their choices are registered names


def _registries() -> dict:
    from fairseq.criterions import CRITERION_REGISTRY
    from fairseq.tasks import TASK_REGISTRY

    return {
        "--task": TASK_REGISTRY,
        "--arch": ARCH_MODEL_REGISTRY,
        "--criterion": CRITERION_REGISTRY,
    }


def _given(argv: Optional[list[str]]) -> dict[str, Optional[str]]:
    """The values of ``REGISTRY_OPTIONS`` on a command line (default: this process's)."""
    finder = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    finder.add_argument("--task")
    finder.add_argument("--arch", "-a")
    finder.add_argument("--criterion")
    try:
        found = finder.parse_known_args(sys.argv[1:] if argv is None else [str(a) for a in argv])[0]
    except argparse.ArgumentError:  # ``--task`` without a name: fairseq's own parser answers it
        return dict.fromkeys(REGISTRY_OPTIONS)
    return {option: getattr(found, option[2:]) for option in REGISTRY_OPTIONS}


def help_served(parser=None, input_args=None, *args, **kwargs) -> bool:
    """Whether the options ``parse_args_and_arch`` is given (``input_args``; None: the process's)
    name a ``--task``, ``--arch`` or ``--criterion`` of the plugin, or one nothing registered
    (``--help`` is answered before any task exists)."""
    registries = _registries()
    given = [(registries[o], v) for o, v in _given(input_args).items() if v is not None]
    return patch_scope.all_tasks() or any(
        v not in registry or patch_scope.defined_by_plugin(registry[v]) for registry, v in given
    )


def _choice_message(error: argparse.ArgumentError, argv: Optional[list[str]]) -> Optional[str]:
    """The one line for a registry option given an unknown name, else None."""
    option = (error.argument_name or "").split("/")[0]
    value = _given(argv).get(option)
    registry = _registries().get(option)
    if registry is None or value is None or value in registry:
        return None
    close = difflib.get_close_matches(value, list(registry), n=1, cutoff=0.6)
    if not close:
        return str(error)
    return (
        f"argument {error.argument_name}: invalid choice: {value!r}; did you mean {close[0]!r}? "
        "(--help lists the choices)"
    )


@contextlib.contextmanager
def one_line_choice_errors(parser: argparse.ArgumentParser, argv: list[str]) -> Iterator[None]:
    """While fairseq parses with ``parser``: an unknown ``--task``, ``--arch`` or ``--criterion``
    is one line and exit status 2; every other error is argparse's own."""
    before = parser.exit_on_error
    parser.exit_on_error = False
    try:
        yield
    except argparse.ArgumentError as error:
        parser.exit_on_error = before
        message = _choice_message(error, argv)
        if message is None:
            parser.error(str(error))
        parser.exit(2, f"{parser.prog}: error: {message}\n")
    finally:
        parser.exit_on_error = before


def _print_help(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """The help with defaults, a model's options showing what ``--arch``'s function and its
    model's dataclass give them (fairseq's order; fairseq leaves them SUPPRESS)."""
    arch = _given(argv)["--arch"]
    if arch in ARCH_CONFIG_REGISTRY:
        args = argparse.Namespace()
        ARCH_CONFIG_REGISTRY[arch](args)
        config = getattr(ARCH_MODEL_REGISTRY[arch], "__dataclass", None)
        defaults = {**(vars(config()) if config is not None else {}), **vars(args)}
        parser.set_defaults(
            **{
                k: v
                for k, v in defaults.items()
                if not (isinstance(v, str) and v.startswith("${"))
                and parser.get_default(k) is argparse.SUPPRESS
            }
        )
    parser.formatter_class = argparse.ArgumentDefaultsHelpFormatter
    parser.print_help()


def help_after_first_pass(original):
    def parse_args_and_arch(
        parser, input_args=None, parse_known=False, suppress_defaults=False, modify_parser=None
    ):
        argv = list(sys.argv[1:] if input_args is None else input_args)
        with one_line_choice_errors(parser, argv):
            return _parse(
                original, parser, input_args, parse_known, suppress_defaults, modify_parser, argv
            )

    return parse_args_and_arch


def _parse(original, parser, input_args, parse_known, suppress_defaults, modify_parser, argv):
    """fairseq's two passes; with ``-h``/``--help``, the help where the second would begin."""
    if not any(a in HELP for a in argv):
        try:
            return original(parser, input_args, parse_known, suppress_defaults, modify_parser)
        except RuntimeError:  # fairseq's bare one: a command with model options and no --arch
            if _given(argv)["--arch"] is not None:
                raise
            parser.exit(2, f"{parser.prog}: error: {missing_arch(_given(argv)['--task'])}\n")
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


def missing_arch(task: Optional[str]) -> str:
    """The line for a command without ``--arch``: the architectures of ``task``'s family (every
    registered one for a task of no family)."""
    from fairseq.models import ARCH_MODEL_INV_REGISTRY

    from fairseq_ext.common.families import FAMILIES

    models = next((f.models for f in FAMILIES if task in f.tasks), ())
    names = [a for m in models for a in ARCH_MODEL_INV_REGISTRY.get(m, ())]
    if names:
        return f"--arch is missing; the architectures of --task {task}: {', '.join(names)}"
    return "--arch is missing (--help lists the architectures)"


def _print_help_without_arch(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """The options of the task and criterion (which fairseq's second pass would add), and a line
    saying that ``--arch`` adds the model's."""
    from fairseq.tasks import TASK_REGISTRY

    args, _ = parser.parse_known_args(argv)
    if getattr(args, "task", None) in TASK_REGISTRY:
        TASK_REGISTRY[args.task].add_args(parser)
    _print_help(parser, argv)
    print(
        "\nThe model's options are listed with --arch ARCH (the architectures: the --arch "
        "choices above)."
    )
    parser.exit()

"""The table of every option the plugin's models, tasks and criteria add to fairseq (name,
default, range or choices, help), generated from their dataclass configs so that the table
cannot disagree with them: ``python -m fairseq_ext.options_table > docs/options.md``
(``tests/test_options_table.py`` checks the committed page)."""

from __future__ import annotations

import dataclasses
import sys
from enum import Enum

from fairseq_ext.fairseq_changes import quiet

if __name__ == "__main__":  # before the imports below import fairseq
    quiet.hush_command(sys.argv[1:])

from fairseq_ext.common.config_fields import choices_of, fields_of, flag, model_config  # noqa: E402

PLUGIN = "fairseq_ext."
HEADER = (
    "# Options\n\nEvery option the plugin's models, tasks and criteria add to fairseq's own, "
    "with its default, its range (or its choices) and its help. Generated from the dataclass "
    "configs by `python -m fairseq_ext.options_table > docs/options.md`; do not edit by hand. On "
    "the command line, `fairseq-train --user-dir fairseq_ext --task TASK --arch ARCH --criterion "
    "CRITERION --help` lists the same options with their defaults. Every task of the plugin also "
    "takes `--verbose`, which keeps the whole log fairseq prints (its configuration, the model, "
    "the set-up, Hydra's and torch's warnings; [what the commands print](output.md)). How they "
    "reach fairseq: [plugin.md](plugin.md#how-the-options-reach-fairseq).\n"
)


def _own_fields(config: type) -> list[dataclasses.Field]:
    """Fields declared by the plugin's classes of ``config``'s MRO (not fairseq's), skipping
    interpolations of fairseq's common options (``${common.seed}``)."""
    names = set()
    for klass in config.__mro__:
        if klass.__module__.startswith(PLUGIN) and dataclasses.is_dataclass(klass):
            names |= set(klass.__dict__.get("__annotations__", {}))
    own = []
    for f in fields_of(config):
        if f.name in names and not (isinstance(f.default, str) and f.default.startswith("${")):
            own.append(f)
    return own


def _default(f: dataclasses.Field) -> str:
    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
        return "required"
    value = f.default if f.default is not dataclasses.MISSING else f.default_factory()
    if isinstance(value, Enum):
        value = value.value
    if value == "???":  # omegaconf's MISSING
        return "required"
    return "unset" if value is None else f"`{value}`"


def _range(f: dataclasses.Field) -> str:
    if "range" in f.metadata:
        return str(f.metadata["range"])
    choices = choices_of(f)
    return ", ".join(f"`{c}`" for c in choices) if choices else ""


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def section(kind: str, name: str, config: type, note: str = "") -> str:
    """One ``## kind name`` section with the table of ``config``'s own options."""
    lines = [f"## {kind} `{name}`", ""]
    if note:
        lines += [note, ""]
    rows = _own_fields(config)
    if not rows:
        return "\n".join(lines + ["No options of its own.", ""])
    lines += ["| option | default | range | help |", "|---|---|---|---|"]
    for f in rows:
        lines.append(
            f"| `{flag(f.name)}` | {_default(f)} | {_cell(_range(f))} | "
            f"{_cell(f.metadata.get('help', ''))} |"
        )
    return "\n".join(lines + [""])


def registered() -> list[tuple[str, str, type, str]]:
    """``(kind, name, config, note)`` of every plugin model, task and criterion, registered
    with fairseq by loading the plugin."""
    from fairseq.criterions import CRITERION_DATACLASS_REGISTRY, CRITERION_REGISTRY
    from fairseq.models import ARCH_MODEL_INV_REGISTRY, MODEL_REGISTRY
    from fairseq.tasks import TASK_DATACLASS_REGISTRY, TASK_REGISTRY

    from fairseq_ext import plugin

    plugin.load()
    out = []
    for name, cls in sorted(MODEL_REGISTRY.items()):
        if cls.__module__.startswith(PLUGIN):
            archs = ", ".join(f"`{a}`" for a in ARCH_MODEL_INV_REGISTRY.get(name, []))
            out.append(("Model", name, model_config(cls), f"Architectures (`--arch`): {archs}."))
    for name, cls in sorted(TASK_REGISTRY.items()):
        if cls.__module__.startswith(PLUGIN):
            out.append(("Task", name, TASK_DATACLASS_REGISTRY[name], ""))
    for name, cls in sorted(CRITERION_REGISTRY.items()):
        if cls.__module__.startswith(PLUGIN):
            out.append(("Criterion", name, CRITERION_DATACLASS_REGISTRY[name], ""))
    return out


def options_page() -> str:
    """The whole ``docs/options.md``."""
    return "\n".join([HEADER] + [section(*entry) for entry in registered()])


if __name__ == "__main__":
    sys.stdout.write(options_page())

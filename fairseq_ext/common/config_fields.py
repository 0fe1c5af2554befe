"""The plugin's options as fields of fairseq dataclass configs: ``option`` states an option's
default, help and range once, for the command line, ``check_config`` and the options table."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Iterator, Mapping, Optional, Sequence

from fairseq.dataclass.utils import gen_parser_from_dataclass
from fairseq.utils import safe_getattr, safe_hasattr

from fairseq_ext.common.errors import require


@dataclass(frozen=True)
class Range:
    """A numeric interval; ``None`` ends are open to infinity, which ``finite`` excludes."""

    low: Optional[float] = None
    high: Optional[float] = None
    low_open: bool = False
    high_open: bool = False
    finite: bool = False

    def __contains__(self, value) -> bool:
        if value is None or (
            isinstance(value, float) and (math.isnan(value) or (self.finite and math.isinf(value)))
        ):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def __str__(self) -> str:
        if self.low is not None and self.high is not None:
            left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
            return f"in {left}{self.low:g}, {self.high:g}{right}"
        finite = "a finite number " if self.finite else ""
        if self.low is not None:
            return f"{finite}{'>' if self.low_open else '>='} {self.low:g}"
        return f"{finite}{'<' if self.high_open else '<='} {self.high:g}"


def option(
    default: Any, help: str, *, range: Optional[Range] = None, registry: Optional[Mapping] = None
) -> Any:
    """A config field: ``default``, ``help`` and, for numbers, the ``range`` it must lie in;
    ``registry``: choices that can grow after import, checked by ``check_config`` at build time."""
    metadata = {"help": help, "range": range, "registry": registry}
    return field(default=default, metadata={k: v for k, v in metadata.items() if v is not None})


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def choices_of(f: dataclasses.Field) -> Optional[Sequence[str]]:
    """The allowed values of a ``ChoiceEnum`` or registry field (its keys now), else None."""
    if "registry" in f.metadata:
        return list(f.metadata["registry"])
    kind = f.type
    inner = [a for a in getattr(kind, "__args__", ()) if a is not type(None)]
    kind = inner[0] if inner else kind
    if isinstance(kind, type) and issubclass(kind, Enum):
        return [c.value for c in kind]
    return None


def fields_of(config: type) -> Iterator[dataclasses.Field]:
    """The public fields of a config class."""
    return (f for f in dataclasses.fields(config) if not f.name.startswith("_"))


def add_config_args(parser, config: type) -> None:
    """The config's options on a model's argparse parser, without defaults (an unset option stays
    unset for a named architecture to choose, as in fairseq's models)."""
    gen_parser_from_dataclass(parser, config(), delete_default=True)


def model_config(model: type) -> type:
    """The dataclass of a plugin model's own options: the one registered with it, else its
    ``options_config`` (a model extending an argparse-configured fairseq model)."""
    return getattr(model, "__dataclass", None) or model.options_config


def fill_defaults(args, config: type) -> None:
    """``args.<name> = default`` for every option of ``config`` that ``args`` leaves unset."""
    for f in fields_of(config):
        if safe_getattr(args, f.name, None) is None and (
            f.default is not None or not safe_hasattr(args, f.name)
        ):
            setattr(args, f.name, f.default)


def option_value(args, name: str):
    """``args.<name>`` as a plain value (a ``ChoiceEnum`` member as its string)."""
    v = safe_getattr(args, name, None)
    return v.value if isinstance(v, Enum) else v


def check_config(args, config: type) -> None:
    """One clear error for the first option of ``config`` outside its range or choices."""
    for f in fields_of(config):
        v = option_value(args, f.name)
        choices = choices_of(f)
        if choices is not None and v is not None:
            require(
                v in choices, f"{flag(f.name)} {v!r} is unknown; choose one of {', '.join(choices)}"
            )
        bounds = f.metadata.get("range")
        if bounds is not None:
            require(v in bounds, f"{flag(f.name)} must be {bounds}, got {v}")


def set_unset(args, **values) -> None:
    """``args.<name> = value`` for every given option that ``args`` leaves unset: a named
    architecture's choice of options it does not own (fairseq's sizes, dropout, ...)."""
    for name, v in values.items():
        if safe_getattr(args, name, None) is None:
            setattr(args, name, v)


def set_sizes(args, sides=("encoder", "decoder"), **sizes) -> None:
    """A named architecture's sizes (``layers``, ``embed_dim``, ``ffn_embed_dim``,
    ``attention_heads``) of the Transformer stacks in ``sides``, where unset."""
    for side in sides:
        set_unset(args, **{f"{side}_{name}": value for name, value in sizes.items()})

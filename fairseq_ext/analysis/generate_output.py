"""Read ``fairseq-generate`` output (S/T/H/D/E/I lines) of a mask-predict run."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_LINE = re.compile(r"^([STHDEIP])-(\d+)(?:_(\d+))?\t(.*)$")
MASK_TOKEN = "<unk>"


@dataclass
class Decoded:
    """One sentence of a ``fairseq-generate --retain-iter-history`` run."""

    source: str = ""
    reference: str = ""
    hypothesis: str = ""
    history: list[list[str]] = field(default_factory=list)

    @property
    def predictions(self) -> list[list[str]]:
        """Tokens after each decoder pass: history entries 1, 3, 5, ..."""
        return self.history[1::2]

    @property
    def pass_inputs(self) -> list[list[str]]:
        """Decoder input of each pass: history entries 0, 2, 4, ...; ``<unk>`` marks a mask."""
        return self.history[0::2][: len(self.predictions)]


def read_generate_output(path: str) -> list[Decoded]:
    """Parse a ``fairseq-generate`` output file into sentences ordered by id."""
    by_id: dict[int, Decoded] = {}
    histories: dict[int, dict[int, list[str]]] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = _LINE.match(line.rstrip("\n"))
            if not m:
                continue
            kind, sid, step, rest = m.group(1), int(m.group(2)), m.group(3), m.group(4)
            d = by_id.setdefault(sid, Decoded())
            if kind == "S":
                d.source = rest
            elif kind == "T":
                d.reference = rest
            elif kind == "D":
                d.hypothesis = rest.split("\t", 1)[1]
            elif kind == "E":
                histories.setdefault(sid, {})[int(step)] = rest.split(" ") if rest else []
    for sid, steps in histories.items():
        by_id[sid].history = [steps[k] for k in sorted(steps)]
    if not by_id:
        raise ValueError(f"{path} has no fairseq-generate lines (S-/T-/H-/D-)")
    return [by_id[k] for k in sorted(by_id)]


def detokenize(tokens: list[str], post_process: str | None) -> str:
    """Undo the subword split the way ``fairseq-generate --post-process`` does."""
    text = " ".join(tokens)
    if post_process == "sentencepiece":
        return text.replace(" ", "").replace("\u2581", " ").strip()
    if post_process in ("subword_nmt", "@@ "):
        return (text + " ").replace("@@ ", "").rstrip()
    return text

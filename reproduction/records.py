"""One finished run's record: a JSON file written whole (a temporary file renamed into place), so
that an interrupted driver never leaves half a record that a later call would take as done."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path


def write_json(path: Path, data: dict) -> None:
    """Writes ``data`` to ``path`` whole; each process and thread has its own temporary file, so two
    drivers sharing a work folder never rename each other's."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)


ROOT = Path(__file__).resolve().parents[1]


def repository_path(path: Path | str) -> str:
    """``path`` relative to the repository when it lies inside it (results files name no
    machine's folders), else as given."""
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)

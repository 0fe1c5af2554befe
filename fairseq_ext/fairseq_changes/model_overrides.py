"""``--model-overrides`` as fairseq-generate and fairseq-interactive read it: ``ast.literal_eval``
of the text, with one line for text that is no Python literal (``float('nan')``, a typo) or no
dict. The keys and values are checked against the checkpoint when it loads
(``checkpoints.overrides.check_model_overrides``)."""

from __future__ import annotations

import ast

from fairseq_ext.common.errors import FairseqExtError

EXAMPLE = "\"{'iter_decode_max_iter': 4}\""


def literal_overrides(text: str) -> dict:
    """The dict ``text`` writes, or one line saying why there is none."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        raise FairseqExtError(
            f"--model-overrides {text!r} is not a Python literal ({type(exc).__name__}); give a "
            "dict of plain values (numbers, strings, True/False, None; no calls such as "
            f"float('nan')), e.g. {EXAMPLE}"
        ) from None
    if not isinstance(value, dict):
        raise FairseqExtError(
            f"--model-overrides must be a dict, e.g. {EXAMPLE}; got a {type(value).__name__}"
        )
    return value

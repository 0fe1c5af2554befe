"""What every method of the Python API checks before it runs the model."""

from __future__ import annotations

import warnings

import torch

from fairseq_ext.common.errors import FairseqExtError, require

TOO_LONG = ("skip", "error", "truncate")


def as_list(sentences, method: str, pairs: bool = False) -> tuple[list, bool]:
    """``(the inputs as a list, whether one input was given)``; with ``pairs``, a tuple is one."""

    def one(value) -> bool:
        return isinstance(value, str) or (
            pairs and isinstance(value, tuple) and value and all(isinstance(v, str) for v in value)
        )

    item = "a str or a tuple of str (a pair)" if pairs else "a str"
    if one(sentences):
        return [sentences], True
    if not isinstance(sentences, (list, tuple)):
        raise TypeError(
            f"{method}: sentences must be {item} or a list of them, "
            f"got {type(sentences).__name__} {sentences!r:.60}"
        )
    for i, value in enumerate(sentences):
        if not one(value):
            raise TypeError(
                f"{method}: sentences[{i}] must be {item}, got {type(value).__name__} {value!r:.60}"
            )
    return list(sentences), False


def refuse_unknown(method: str, options: dict, accepted) -> None:
    """A ``TypeError`` naming the keywords of ``options`` not in ``accepted``."""
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise TypeError(
            f"{method}() got unknown keyword(s) {', '.join(unknown)}; it accepts "
            f"{', '.join(sorted(accepted))}"
        )


def positive_int(method: str, name: str, value) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(
            f"{method}: {name} must be an integer >= 1, got {type(value).__name__} {value!r}"
        )
    require(value >= 1, f"{method}: {name} must be an integer >= 1, got {value}")
    return value


def require_bool(method: str, name: str, value) -> None:
    require(isinstance(value, bool), f"{method}: {name} must be True or False, got {value!r}")


def fit(tokens: torch.Tensor, limit: int, index: int, method: str, too_long: str, why: str):
    """``tokens`` (ending in ``</s>``) if at most ``limit`` long; else None (``too_long="skip"``),
    refused (``"error"``) or cut with ``</s>`` kept and a warning (``"truncate"``)."""
    if len(tokens) <= limit:
        return tokens
    if too_long == "skip":
        return None
    said = (
        f"{method}: sentences[{index}] has {len(tokens)} tokens, more than the {limit} the model "
        f"takes ({why})"
    )
    if too_long == "error":
        raise FairseqExtError(
            f"{said}; shorten it, or pass too_long='truncate' to keep its first {limit} "
            "(too_long='skip' gives None for it)"
        )
    warnings.warn(f"{said}: truncated to its first {limit}", stacklevel=3)
    return torch.cat([tokens[: limit - 1], tokens[-1:]])


def encoded(
    method, sentences, encode, limit, why, unk, allow_empty, too_long, gives, pairs=False
) -> tuple[list, bool, set[int], dict]:
    """``(inputs, one input given, empty inputs, {index: tokens})``: inputs checked (``as_list``),
    empty ones refused unless ``allow_empty`` (a call gives ``gives`` for them), the others
    ``encode(input, index)``d and fitted in ``limit`` (``fit``); ``<unk>`` pieces are warned
    about, and the inputs ``too_long="skip"`` leaves out named in one warning."""
    batch, single = as_list(sentences, method, pairs)
    require_bool(method, "allow_empty", allow_empty)
    require(
        too_long in TOO_LONG,
        f"{method}: too_long must be one of {', '.join(TOO_LONG)}, got {too_long!r}",
    )
    empty = {i for i, s in enumerate(batch) if not "".join(s).strip()}
    if empty and not allow_empty:
        raise FairseqExtError(
            f"{method}: sentences[{min(empty)}] is empty or whitespace only; give it text, or "
            f"pass allow_empty=True to get {gives} for it"
        )
    tokens, skipped = {}, []
    for i, sentence in enumerate(batch):
        if i in empty:
            continue
        fitted = fit(encode(sentence, i), limit, i, method, too_long, why)
        if fitted is None:
            skipped.append(i)
            continue
        count = fitted.tolist().count(unk)
        if count:
            warnings.warn(
                f"{method}: sentences[{i}] has {count} piece(s) the model's vocabulary lacks "
                "(e.g. emoji or another script); the model reads them as <unk>",
                stacklevel=3,
            )
        tokens[i] = fitted
    if skipped:
        warnings.warn(
            f"{method}: {', '.join(f'sentences[{i}]' for i in skipped)} "
            f"ha{'s' if len(skipped) == 1 else 've'} more tokens than the {limit} the model "
            f"takes ({why}): output None; shorten, or pass too_long='truncate' to keep the first "
            f"{limit} (too_long='error' refuses the call)",
            stacklevel=3,
        )
    return batch, single, empty, tokens

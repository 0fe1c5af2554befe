"""The decoding options of one Python API call, per thread: the hybrid strategy that fills masked
slots (Wang et al. 2021, section 3.2) and the length offset and its ramp, read by the HI-CMLM model
instead of its own, and the removal of consecutive repeats (spans of up to N tokens), read by
mask-predict's generator instead of its own; the model itself is never changed."""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Iterator, Optional


@dataclass(frozen=True)
class DecodingCall:
    """Decoding options of one call (None: as the model was loaded): the hybrid strategy that
    fills masked slots (Wang et al. 2021, section 3.2), the tokens added to each predicted
    target length, the predicted tokens below which it shrinks and the longest
    consecutive repeat (in tokens) removed from the outputs (0: none)."""

    strategy: Optional[str] = None
    length_offset: Optional[int] = None
    remove_repeats: Optional[int] = None
    length_offset_ramp: Optional[int] = None


# per thread (and per asyncio task): ``contextvars`` gives each its own value
_CALL: ContextVar[Optional[DecodingCall]] = ContextVar("fairseq_ext_decoding_call", default=None)


@contextmanager
def decoding_call(
    strategy: Optional[str] = None,
    length_offset: Optional[int] = None,
    remove_repeats: Optional[int] = None,
    length_offset_ramp: Optional[int] = None,
) -> Iterator[None]:
    """Within the block, in this thread only, the HI-CMLM decoder fills masked slots by
    ``strategy`` and adds ``length_offset`` (ramped by ``length_offset_ramp``) to its predicted
    lengths, and mask-predict removes consecutive repeats of up to ``remove_repeats`` tokens from
    its outputs (None: its own)."""
    token = _CALL.set(DecodingCall(strategy, length_offset, remove_repeats, length_offset_ramp))
    try:
        yield
    finally:
        _CALL.reset(token)


def call_strategy(saved: str) -> str:
    """The hybrid strategy of the call under way in this thread, else ``saved`` (the model's)."""
    call = _CALL.get()
    return saved if call is None or call.strategy is None else call.strategy


def call_length_offset(saved: int) -> int:
    """The length offset of the call under way in this thread, else ``saved`` (the model's)."""
    call = _CALL.get()
    return saved if call is None or call.length_offset is None else call.length_offset


def call_length_offset_ramp(saved: int) -> int:
    """The offset's ramp of the call under way in this thread, else ``saved`` (the model's)."""
    call = _CALL.get()
    return saved if call is None or call.length_offset_ramp is None else call.length_offset_ramp


def call_remove_repeats(saved: int) -> int:
    """The longest consecutive repeat (tokens) that the call under way in this thread removes,
    else ``saved`` (the generator's)."""
    call = _CALL.get()
    return saved if call is None or call.remove_repeats is None else call.remove_repeats


def in_call() -> bool:
    """Whether a Python API call (``decoding_call``) is under way in this thread."""
    return _CALL.get() is not None

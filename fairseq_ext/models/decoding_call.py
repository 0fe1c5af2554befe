"""The decoding options of one Python API call, per thread: the hybrid strategy that fills masked
slots (Wang et al. 2021, section 3.2), the length offset and its ramp, read by the HI-CMLM model,
and the longest consecutive repeat removed, read by mask-predict's generator; the model is never
changed."""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Iterator, Optional


@dataclass(frozen=True)
class DecodingCall:
    """Decoding options of one call (None: as the model was loaded): the hybrid strategy, the
    tokens added to each predicted target length, the predicted tokens below which they shrink
    (the ramp), the longest consecutive repeat (in tokens) removed from the outputs (0: none)."""

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
    """Within the block, in this thread only, decoding uses these options (None: its own)."""
    token = _CALL.set(DecodingCall(strategy, length_offset, remove_repeats, length_offset_ramp))
    try:
        yield
    finally:
        _CALL.reset(token)


def call_option(name: str, saved):
    """Option ``name`` of the call under way in this thread, else ``saved`` (the model's)."""
    value = getattr(_CALL.get(), name, None)
    return saved if value is None else value


def in_call() -> bool:
    """Whether a Python API call (``decoding_call``) is under way in this thread."""
    return _CALL.get() is not None

"""Checks of the numeric options of the plugin's generators, run when a task builds one: a
value that fairseq clamps, ignores or stops on with an ``assert`` is one error naming the option.
``MAX_PASSES`` bounds mask-predict's passes; ``decoding_call`` gives one Python API call its own
hybrid strategy (Wang et al. 2021, section 3.2) and length offset, leaving the model unchanged.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

from fairseq.dataclass.configs import GenerationConfig

from fairseq_ext.common.errors import require

# A CMLM translation has at most 253 tokens to predict (the length predictor's 256 classes, less
# <s> and </s>, and 255 the longest target), and with as many passes as tokens mask-predict already
# fixes one token a pass (pass t re-masks floor(N (1 - (t + 1) / T)) of N tokens, Ghazvininejad et
# al. 2019, section 3.1); more passes only repeat a mask count. Every pass costs a decoder run.
MAX_PASSES = 253


@dataclass(frozen=True)
class DecodingCall:
    """Decoding options of one call (None: as the model was loaded): the hybrid strategy that
    fills masked slots (Wang et al. 2021, section 3.2) and the tokens added to each predicted
    target length."""

    strategy: Optional[str] = None
    length_offset: Optional[int] = None


# per thread (and per asyncio task): ``contextvars`` gives each its own value
_CALL: ContextVar[Optional[DecodingCall]] = ContextVar("fairseq_ext_decoding_call", default=None)


@contextmanager
def decoding_call(
    strategy: Optional[str] = None, length_offset: Optional[int] = None
) -> Iterator[None]:
    """Within the block, in this thread only, the HI-CMLM decoder fills masked slots by
    ``strategy`` and adds ``length_offset`` to its predicted lengths (None: its own)."""
    token = _CALL.set(DecodingCall(strategy, length_offset))
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


def in_call() -> bool:
    """Whether a Python API call (``decoding_call``) is under way in this thread."""
    return _CALL.get() is not None


def generation_option(args, name: str) -> Any:
    """``args.<name>``, or fairseq's default (``GenerationConfig``) where ``args`` lacks it
    (e.g. the options of ``--eval-bleu-args``)."""
    value = getattr(args, name, None)
    return getattr(GenerationConfig, name) if value is None else value


def _require_option(args, name: str, in_range: Callable[[Any], bool], requirement: str) -> None:
    value = generation_option(args, name)
    require(in_range(value), f"--{name.replace('_', '-')} {requirement}, got {value}")


def check_mask_predict_options(args) -> None:
    """Options of ``MaskPredictGenerator`` (task ``cmlm_hybrid``)."""
    _require_option(
        args,
        "iter_decode_with_beam",
        lambda v: v >= 1,
        "must be >= 1 (the number of length candidates per sentence)",
    )
    _require_option(
        args,
        "iter_decode_max_iter",
        lambda v: 0 <= v < MAX_PASSES,
        f"must be in [0, {MAX_PASSES - 1}] (fairseq counts from 0: 9 means 10 decoder passes; "
        f"with {MAX_PASSES} passes mask-predict fixes one token a pass of the longest translation "
        "a CMLM predicts, more only repeat)",
    )
    _require_option(
        args,
        "iter_decode_eos_penalty",
        lambda v: v == 0,
        "is not used by mask-predict (a CMLM predicts the target length before decoding); drop it",
    )
    _require_option(
        args,
        "nbest",
        lambda v: v == 1,
        "must be 1: mask-predict gives one hypothesis per sentence, the best of its "
        "--iter-decode-with-beam length candidates",
    )


def check_beam_search_options(args, vocabulary_size: int) -> None:
    """Options of fairseq's ``SequenceGenerator`` and its subclasses for a target vocabulary
    of ``vocabulary_size`` entries (padding included)."""
    beam, min_len = generation_option(args, "beam"), generation_option(args, "min_len")
    _require_option(
        args,
        "beam",
        lambda v: 1 <= v <= vocabulary_size - 1,
        f"must be in [1, {vocabulary_size - 1}] (the target vocabulary less padding)",
    )
    _require_option(args, "nbest", lambda v: 1 <= v <= beam, f"must be in [1, --beam {beam}]")
    _require_option(args, "min_len", lambda v: v >= 0, "must be >= 0")
    _require_option(
        args,
        "max_len_a",
        lambda v: v >= 0,
        "must be >= 0 (the longest output is --max-len-a x source length + --max-len-b)",
    )
    _require_option(
        args,
        "max_len_b",
        lambda v: v >= 0 and (generation_option(args, "max_len_a") > 0 or v >= min_len),
        f"must be >= 0, and >= --min-len {min_len} when --max-len-a is 0 (the longest "
        "output is --max-len-a x source length + --max-len-b)",
    )
    _require_option(
        args, "no_repeat_ngram_size", lambda v: v >= 0, "must be >= 0 (0: no n-gram is blocked)"
    )
    _require_option(args, "temperature", lambda v: v > 0, "must be > 0")

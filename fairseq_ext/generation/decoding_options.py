"""Checks of the numeric options of the plugin's generators, run when a task builds one: a
value that fairseq clamps, ignores or stops on with an ``assert`` is one error naming the option."""

from __future__ import annotations

from typing import Any

from fairseq.dataclass.configs import GenerationConfig

from fairseq_ext.common.errors import require

# A CMLM translation has at most 253 tokens to predict (256 length classes less <s> and </s>);
# with as many passes, mask-predict fixes one token a pass (Ghazvininejad et al. 2019, 3.1).
MAX_PASSES = 253


def generation_option(args, name: str) -> Any:
    """``args.<name>``, or fairseq's default where ``args`` lacks it (``--eval-bleu-args``)."""
    value = getattr(args, name, None)
    return getattr(GenerationConfig, name) if value is None else value


def _check(args, checks) -> None:
    """One error for the first ``(name, in_range, requirement)`` whose value is out of range."""
    for name, in_range, requirement in checks:
        value = generation_option(args, name)
        require(in_range(value), f"--{name.replace('_', '-')} {requirement}, got {value}")


def check_mask_predict_options(args) -> None:
    """Options of ``MaskPredictGenerator`` (task ``cmlm_hybrid``)."""
    passes = (
        f"must be in [0, {MAX_PASSES - 1}] (fairseq counts from 0: 9 means 10 decoder passes; "
        f"with {MAX_PASSES} passes mask-predict fixes one token a pass of the longest translation "
        "a CMLM predicts, more only repeat)"
    )
    unused = "is not used by mask-predict (a CMLM predicts the target length before decoding)"
    one = "must be 1: mask-predict gives one hypothesis per sentence, the best of its "
    _check(
        args,
        [
            (
                "iter_decode_with_beam",
                lambda v: v >= 1,
                "must be >= 1 (the number of length candidates per sentence)",
            ),
            ("iter_decode_max_iter", lambda v: 0 <= v < MAX_PASSES, passes),
            ("iter_decode_eos_penalty", lambda v: v == 0, unused + "; drop it"),
            ("nbest", lambda v: v == 1, one + "--iter-decode-with-beam length candidates"),
        ],
    )


def check_beam_search_options(args, vocabulary_size: int) -> None:
    """Options of fairseq's ``SequenceGenerator`` and its subclasses for a target vocabulary
    of ``vocabulary_size`` entries (padding included)."""
    beam, min_len = generation_option(args, "beam"), generation_option(args, "min_len")
    longest = "(the longest output is --max-len-a x source length + --max-len-b)"
    len_a = generation_option(args, "max_len_a")
    _check(
        args,
        [
            (
                "beam",
                lambda v: 1 <= v < vocabulary_size,
                f"must be in [1, {vocabulary_size - 1}] (the target vocabulary less padding)",
            ),
            ("nbest", lambda v: 1 <= v <= beam, f"must be in [1, --beam {beam}]"),
            ("min_len", lambda v: v >= 0, "must be >= 0"),
            ("max_len_a", lambda v: v >= 0, f"must be >= 0 {longest}"),
            (
                "max_len_b",
                lambda v: v >= 0 and (len_a > 0 or v >= min_len),
                f"must be >= 0, and >= --min-len {min_len} when --max-len-a is 0 {longest}",
            ),
            ("no_repeat_ngram_size", lambda v: v >= 0, "must be >= 0 (0: no n-gram is blocked)"),
            ("temperature", lambda v: v > 0, "must be > 0"),
        ],
    )

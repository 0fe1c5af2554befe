"""A sentencepiece model checked against the dictionary it feeds (for ``--bpe sentencepiece``, the
hub and the data scripts): refused below ``REFUSED_BELOW`` coverage of the dictionary's symbols,
warned about below ``COVERED``. Imports neither fairseq nor sentencepiece."""

from __future__ import annotations

import os
import re
import sys
from typing import Callable, Iterable

from fairseq_ext.common.errors import FairseqExtError, note, require

COVERED = 0.9  # the share of the dictionary a model must cover not to be warned about
REFUSED_BELOW = 0.5  # under this share the model is refused
WORD_MARK = "\u2581"  # sentencepiece's mark of a piece that starts a word
# special symbols, fairseq's padding of the dictionary
_NOT_PIECES = re.compile(r"<.*>|madeupword\d+")


def load_sentencepiece(path: str, option: str):
    """The sentencepiece model of the file ``path`` (given as ``option``)."""
    import sentencepiece

    require(
        os.path.isfile(path),
        f"{option} {path} does not exist; give the sentencepiece model (a .model file) "
        "that encoded the training data",
    )
    try:
        return sentencepiece.SentencePieceProcessor(model_file=path)
    except (RuntimeError, OSError) as exc:
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        raise FairseqExtError(
            f"{option} {path} is not a sentencepiece model (sentencepiece cannot read it: "
            f"{reason}); give the .model file that spm_train (data_prep/spm.py train) wrote and "
            "that encoded the training data, e.g. the spm.model beside the checkpoint"
        ) from None


def _words(symbols: Iterable[str]) -> list[str]:
    return [s for s in symbols if not _NOT_PIECES.fullmatch(s)]


def pieces(processor) -> set[str]:
    """The pieces of a ``SentencePieceProcessor``."""
    return {processor.id_to_piece(i) for i in range(processor.get_piece_size())}


def dictionary_symbols(path: str) -> list[str]:
    """The symbols of a fairseq ``dict.txt`` (its lines' first fields)."""
    with open(path, encoding="utf-8") as f:
        return [line.split()[0] for line in f if line.strip()]


def coverage(model_pieces: set[str], symbols: Iterable[str]) -> tuple[int, int]:
    """How many of the dictionary's words (``symbols`` but special ones and padding) are pieces
    of the model, and of how many."""
    words = _words(symbols)
    return sum(s in model_pieces for s in words), len(words)


def check_coverage(
    model_pieces: set[str],
    symbols: Iterable[str],
    model: str,
    dictionary: str,
    warn: Callable[[str], None],
) -> None:
    """Refuse a model that covers under ``REFUSED_BELOW`` of the dictionary, ``warn`` about one
    under ``COVERED``; ``model`` and ``dictionary`` name them in the message."""
    covered, total = coverage(model_pieces, symbols)
    if total == 0 or covered >= COVERED * total:
        return
    share = (
        f"the sentencepiece model {model} ({len(model_pieces)} pieces) has only {covered} of the "
        f"{total} symbols of {dictionary} ({100 * covered / total:.0f}%)"
    )
    if covered < REFUSED_BELOW * total:
        raise FairseqExtError(
            f"{share}: it is not the model whose pieces the dictionary holds, so text encoded "
            "with it reaches the model as pieces it was not trained on (and <unk>); give the "
            "sentencepiece model that encoded the training data, e.g. the spm.model beside the "
            "checkpoint"
        )
    warn(
        f"{share}: expected only if the dictionary was joined from several models (one per "
        "language); otherwise give the sentencepiece model that encoded the training data"
    )


def is_sentencepiece_dictionary(symbols: list[str]) -> bool:
    """Whether a tenth or more of a dictionary's words start with ``WORD_MARK``."""
    words = _words(symbols)
    return bool(words) and sum(s.startswith(WORD_MARK) for s in words) >= 0.1 * len(words)


def refuse_raw_text(sentence: str, index: int, method: str) -> None:
    """Refuse a non-empty input without ``WORD_MARK`` (raw text) for a model that takes pieces."""
    require(
        not sentence.strip() or WORD_MARK in sentence,
        f"{method}: sentences[{index}] is raw text ({sentence.strip()!r:.60}), but this model was "
        "loaded without a tokenizer (no spm.model in its folder), so it takes sentencepiece "
        f"pieces (e.g. '{WORD_MARK}A {WORD_MARK}man ...'): put the sentencepiece model that "
        "encoded its training data in the folder as spm.model, or give from_pretrained(..., "
        "bpe='sentencepiece', sentencepiece_model=PATH), or pass the input as pieces",
    )


def checked_bpe(build: Callable, cfg, dictionary, dictionary_name: str):
    """fairseq's ``build_bpe(cfg)``; a ``--bpe sentencepiece`` model read first (one line if it is
    none) and checked against ``dictionary``."""
    name = getattr(cfg, "_name", None) or getattr(cfg, "bpe", None)
    if name != "sentencepiece":
        return build(cfg)
    path = str(cfg.sentencepiece_model)
    if os.path.isfile(path):
        load_sentencepiece(path, "--sentencepiece-model")
    bpe = build(cfg)
    if bpe is not None and dictionary is not None:
        check_coverage(pieces(bpe.sp), dictionary.symbols, path, dictionary_name, note)
    return bpe


def checked_sentencepiece(
    path: str, option: str, dictionary_path: str, script: str, dictionary_option: str = "--dict"
):
    """For a data script: the model ``path`` checked against the ``dict.txt`` it binarizes with; a
    refusal exits with one line."""

    def warn(message: str) -> None:
        sys.stderr.write(f"{script}: warning: {message}\n")

    try:
        processor = load_sentencepiece(path, option)
        check_coverage(
            pieces(processor),
            dictionary_symbols(dictionary_path),
            path,
            f"{dictionary_option} {dictionary_path}",
            warn,
        )
    except FairseqExtError as exc:
        raise SystemExit(f"{script}: error: {exc}") from None
    return processor


def main(argv: list[str] | None = None) -> None:
    """``python -m fairseq_ext.common.tokenizer_check MODEL DICT`` for ``data_prep/common.sh``."""
    model, dictionary = sys.argv[1:] if argv is None else argv
    checked_sentencepiece(
        model, "the sentencepiece model", dictionary, "data_prep/common.sh", "SRCDICT"
    )


if __name__ == "__main__":
    main()

"""Text in, text out for the sequence-to-sequence families on fairseq's
``GeneratorHubInterface``, decoding as ``fairseq-generate`` with the same options:
``HICMLMHubInterface.translate`` (mask-predict, Ghazvininejad et al. 2019, with HI-CMLM's decoder
input, Wang et al. 2021, section 3.2) and ``Seq2SeqHubInterface.summarize`` (beam search)."""

from __future__ import annotations

import warnings
from dataclasses import fields

from fairseq.hub_utils import GeneratorHubInterface

from fairseq_ext.common.errors import require
from fairseq_ext.common.tokenizer_check import is_sentencepiece_dictionary, refuse_raw_text
from fairseq_ext.generation.decoding_options import MAX_PASSES
from fairseq_ext.hub.inputs import (
    as_list,
    check_choices,
    empty_rows,
    fit,
    positive_int,
    refuse_unknown,
    warn_unknown,
)
from fairseq_ext.masking import HYBRID_STRATEGIES
from fairseq_ext.models.decoding_call import decoding_call
from fairseq_ext.models.hi_cmlm_transformer import MAX_NAT_TARGET_LENGTH

CALL_ARGUMENTS = ("allow_empty", "too_long", "verbose")
# translate's arguments and the fairseq generation options they set
HICMLM_ARGUMENTS = {
    "passes": "iter_decode_max_iter",
    "length_beam": "iter_decode_with_beam",
    "force_passes": "iter_decode_force_max_iter",
}


class TextGenerator(GeneratorHubInterface):
    """fairseq's ``sample`` with one output per input."""

    def input_limit(self) -> tuple[int, str]:
        positions = getattr(self.task, "model_positions", None)
        if positions is not None:  # UniLM: source and target share one position table
            return positions - 2, "its positions, less two for the target"
        limit = min(p for p in self.max_positions if p is not None)
        return limit, "its source and target positions"

    def generate_text(
        self,
        method: str,
        sentences,
        beam: int,
        arguments: tuple,
        options: dict,
        verbose: bool,
        allow_empty: bool,
        too_long: str,
    ):
        """The best hypothesis of each input, decoded (``""`` for an empty one)."""
        refuse_unknown(
            method, options, [*arguments, *(k for k in self.cfg.generation if k != "_name")]
        )
        batch, single = as_list(sentences, method)
        check_choices(method, allow_empty, too_long)
        empty = empty_rows(batch, method, allow_empty, gives='""')
        limit, why = self.input_limit()
        takes_pieces = self.bpe is None and is_sentencepiece_dictionary(self.src_dict.symbols)
        tokens = {}
        for i, sentence in enumerate(batch):
            if i not in empty:
                if takes_pieces:
                    refuse_raw_text(sentence, i, method)
                tokens[i] = fit(self.encode(sentence), limit, i, method, too_long, why)
                warn_unknown(tokens[i], self.src_dict.unk(), i, method)
        outputs = [""] * len(batch)
        if tokens:
            hypotheses = self.generate(list(tokens.values()), beam, verbose, **options)
            for i, hypos in zip(tokens, hypotheses):
                outputs[i] = self.decode(hypos[0]["tokens"])
        return outputs[0] if single else outputs


class HICMLMHubInterface(TextGenerator):
    """A ``cmlm_hybrid`` checkpoint (``hi_cmlm_transformer``)."""

    # as docs/results/hi-cmlm.md decodes; fairseq's defaults are 11 passes, length beam 1
    DEFAULT_GENERATION = {"iter_decode_max_iter": 9, "iter_decode_with_beam": 3}
    # the length offset and the removal of consecutive repeated tokens that from_pretrained sets
    # where it is not given them: chosen together on Multi30k val for the shipped student
    # (reproduction/hi_cmlm/remove_repeats.json, docs/results/hi-cmlm.md)
    DEFAULT_DECODING = {"length_offset": 3, "remove_repeats": 3}

    def input_limit(self) -> tuple[int, str]:
        """The source positions, and at most the 255 tokens the length predictor can give."""
        limit = min(self.max_positions[0], MAX_NAT_TARGET_LENGTH)
        return (
            limit,
            f"its source positions and the {MAX_NAT_TARGET_LENGTH} target tokens its length "
            "predictor has",
        )

    def translate(
        self,
        sentences,
        passes: int | None = None,
        length_beam: int | None = None,
        strategy: str | None = None,
        length_offset: int | None = None,
        remove_repeats: int | None = None,
        force_passes: bool | None = None,
        allow_empty: bool = True,
        too_long: str = "error",
        verbose: bool = False,
        **options,
    ):
        """Translate a sentence or a list of them (docs/python-api.md). Unset arguments keep
        ``from_pretrained``'s, else ``DEFAULT_GENERATION``, else the checkpoint's; ``strategy``,
        ``length_offset`` and ``remove_repeats`` are for this call alone."""
        given = {"passes": passes, "length_beam": length_beam, "force_passes": force_passes}
        for name, option in HICMLM_ARGUMENTS.items():
            require(
                given[name] is None or option not in options,
                f"translate: give {name} or {option}, not both ({name} sets {option})",
            )
        if passes is not None:
            passes = positive_int("translate", "passes", passes)
            require(
                passes <= MAX_PASSES,
                f"translate: passes must be at most {MAX_PASSES}, got {passes}: with {MAX_PASSES} "
                "passes mask-predict fixes one token a pass of the longest translation a CMLM "
                "predicts, more only repeat (10 is the results pages' setting)",
            )
            options["iter_decode_max_iter"] = passes - 1
        if length_beam is not None:
            options["iter_decode_with_beam"] = positive_int("translate", "length_beam", length_beam)
        if force_passes is not None:
            require(
                isinstance(force_passes, bool),
                f"translate: force_passes must be True or False, got {force_passes!r}",
            )
            options["iter_decode_force_max_iter"] = force_passes
        require(
            strategy is None or strategy in HYBRID_STRATEGIES,
            f"translate: strategy {strategy!r} is unknown; choose one of "
            f"{', '.join(HYBRID_STRATEGIES)}",
        )
        self.check_integer("translate", "length_offset", length_offset)
        self.check_integer("translate", "remove_repeats", remove_repeats)
        arguments = (
            *HICMLM_ARGUMENTS,
            "strategy",
            "length_offset",
            "remove_repeats",
            *CALL_ARGUMENTS,
        )
        with decoding_call(strategy, length_offset, remove_repeats):
            outputs = self.generate_text(
                "translate",
                sentences,
                self.cfg.generation.beam,
                arguments,
                options,
                verbose,
                allow_empty,
                too_long,
            )
        self._warn_emptied(sentences, outputs, length_offset)
        return outputs

    def check_integer(self, method: str, name: str, value) -> None:
        """``value`` None, or an integer in the range of the task's option ``name``."""
        if value is None:
            return
        bounds = {f.name: f for f in fields(getattr(type(self.task), "__dataclass"))}[
            name
        ].metadata["range"]
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(
                f"{method}: {name} must be an integer {bounds}, got "
                f"{type(value).__name__} {value!r}"
            )
        require(value in bounds, f"{method}: {name} must be {bounds}, got {value}")

    def _warn_emptied(self, sentences, outputs, length_offset) -> None:
        """Warn with the share of non-empty inputs that a negative length offset left empty."""
        offset = self.task.cfg.length_offset if length_offset is None else length_offset
        if offset >= 0:
            return
        pairs = [(outputs, sentences)] if isinstance(sentences, str) else zip(outputs, sentences)
        given = [output for output, sentence in pairs if sentence.strip()]
        empty = sum(not output for output in given)
        if empty:
            warnings.warn(
                f"translate: {empty} of {len(given)} outputs are empty: length_offset={offset} "
                f"cuts every predicted length by {-offset} tokens; give an offset closer to 0 "
                "(0 decodes as the model was trained)",
                stacklevel=3,
            )


class Seq2SeqHubInterface(TextGenerator):
    """A ``translation_prophetnet`` or ``unilm_seq2seq`` checkpoint."""

    def summarize(
        self,
        sentences,
        beam: int | None = None,
        allow_empty: bool = True,
        too_long: str = "error",
        verbose: bool = False,
        **options,
    ):
        """The best beam-search output for a source or a list of them (docs/python-api.md);
        ``options``: generation options by fairseq name."""
        return self._beam_search(
            "summarize", sentences, beam, allow_empty, too_long, verbose, options
        )

    def translate(
        self,
        sentences,
        beam: int | None = None,
        allow_empty: bool = True,
        too_long: str = "error",
        verbose: bool = False,
        **options,
    ):
        """``summarize`` by the name fairseq's translation interface uses."""
        return self._beam_search(
            "translate", sentences, beam, allow_empty, too_long, verbose, options
        )

    def _beam_search(self, method, sentences, beam, allow_empty, too_long, verbose, options):
        beam = self.cfg.generation.beam if beam is None else positive_int(method, "beam", beam)
        return self.generate_text(
            method,
            sentences,
            beam,
            ("beam", *CALL_ARGUMENTS),
            options,
            verbose,
            allow_empty,
            too_long,
        )

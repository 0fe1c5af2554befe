"""Text in, text out for the sequence-to-sequence families on fairseq's
``GeneratorHubInterface``, decoding as ``fairseq-generate`` with the same options:
``HICMLMHubInterface.translate`` (mask-predict, Ghazvininejad et al. 2019, with HI-CMLM's decoder
input, Wang et al. 2021, section 3.2) and ``Seq2SeqHubInterface.summarize`` (beam search)."""

from __future__ import annotations

import warnings
from argparse import Namespace
from dataclasses import fields
from functools import partialmethod

import numpy as np
import torch
from fairseq import utils
from fairseq.data import LanguagePairDataset
from fairseq.data.data_utils import numpy_seed
from fairseq.hub_utils import GeneratorHubInterface
from fairseq.tokenizer import tokenize_line
from omegaconf import OmegaConf

from fairseq_ext.common.errors import require
from fairseq_ext.common.tokenizer_check import is_sentencepiece_dictionary, refuse_raw_text
from fairseq_ext.generation.decoding_options import MAX_PASSES
from fairseq_ext.generation.lean_mask_predict import VocabularyProjection
from fairseq_ext.hub.inputs import encoded, positive_int, refuse_unknown, require_bool
from fairseq_ext.masking import HYBRID_STRATEGIES
from fairseq_ext.models.decoding_call import decoding_call
from fairseq_ext.models.hi_cmlm_transformer import MAX_NAT_TARGET_LENGTH

CALL_ARGUMENTS = ("allow_empty", "too_long", "verbose")
# fairseq's get_batch_iterator orders a dataset under numpy_seed(seed + epoch): 1 + 1, as the hub
# calls it (ties of length keep that order in a batch; int8 decoding depends on a row's batch)
ITERATOR_SEED = 2
# translate's arguments and the fairseq generation options they set
HICMLM_ARGUMENTS = {
    "passes": "iter_decode_max_iter",
    "length_beam": "iter_decode_with_beam",
    "force_passes": "iter_decode_force_max_iter",
}


def one_row(dataset) -> dict:
    """``dataset.collater`` of the one row of a plain ``LanguagePairDataset`` for inference, made
    directly (the general collation is a call's largest cost around the decode of a sentence)."""
    sample = dataset[0]
    if (
        type(dataset) is not LanguagePairDataset
        or dataset.pad_to_multiple != 1
        or dataset.src_lang_id is not None
        or dataset.tgt_lang_id is not None
        or set(sample) != {"id", "source", "target"}
        or sample["target"] is not None
    ):
        return dataset.collater([sample])
    source = sample["source"]
    length = int(source.ne(dataset.src_dict.pad()).sum())
    return {
        "id": torch.tensor([0]),
        "nsentences": 1,
        "ntokens": length,
        "net_input": {"src_tokens": source[None].clone(), "src_lengths": torch.tensor([length])},
        "target": None,
    }


class TextGenerator(GeneratorHubInterface):
    """fairseq's ``sample`` with one output per input."""

    def __init__(self, cfg, task, models):
        super().__init__(cfg, task, models)
        # the generation and batching options as built, read by every call (not deep-copied)
        self.generation_options = OmegaConf.to_container(cfg.generation, resolve=True)
        self.batching = {
            "max_tokens": cfg.dataset.max_tokens,
            "max_sentences": cfg.dataset.batch_size,
        }

    def generate(
        self,
        tokenized_sentences,
        beam: int = 5,
        verbose: bool = False,
        skip_invalid_size_inputs: bool = False,
        inference_step_args=None,
        prefix_allowed_tokens_fn=None,
        **kwargs,
    ):
        """fairseq's ``generate``, with the call's options over ``generation_options`` rather
        than over a deep copy of the configuration, and batches from ``_build_batches``."""
        if verbose or (torch.is_tensor(tokenized_sentences) and tokenized_sentences.dim() == 1):
            return super().generate(
                tokenized_sentences,
                beam,
                verbose,
                skip_invalid_size_inputs,
                inference_step_args,
                prefix_allowed_tokens_fn,
                **kwargs,
            )
        generator = self.generator(beam, kwargs, prefix_allowed_tokens_fn)
        results = []
        for batch in self._build_batches(tokenized_sentences, skip_invalid_size_inputs):
            if self.device.type != "cpu":  # batches are collated on the CPU
                batch = utils.apply_to_sample(lambda t: t.to(self.device), batch)
            hypotheses = self.task.inference_step(
                generator, self.models, batch, **(inference_step_args or {})
            )
            results.extend(zip(batch["id"].tolist(), hypotheses))
        return [hypos for _, hypos in sorted(results, key=lambda x: x[0])]

    def generator(self, beam: int, options: dict, prefix_allowed_tokens_fn=None):
        """The task's generator of ``beam`` and ``options`` over ``generation_options``."""
        call = Namespace(**{**self.generation_options, "beam": beam, **options})
        return self.task.build_generator(
            self.models, call, prefix_allowed_tokens_fn=prefix_allowed_tokens_fn
        )

    def binarize(self, sentence: str) -> torch.LongTensor:
        """fairseq's ``Dictionary.encode_line``, the tensor made from a list at once."""
        index = self.src_dict.index
        return torch.tensor([*map(index, tokenize_line(sentence)), self.src_dict.eos()])

    def string(self, tokens) -> str:
        """fairseq's, from a 1-d tensor's ids as a list (ten times faster than one by one)."""
        if torch.is_tensor(tokens) and tokens.dim() == 1:
            tokens = tokens.tolist()
        return self.tgt_dict.string(tokens)

    def _build_batches(self, tokens: list, skip_invalid_size_inputs: bool):
        """fairseq's batches of ``tokens``; where they make one batch, that one (``one_batch``)."""
        lengths = np.array([t.numel() for t in tokens], dtype=np.int64)
        dataset = self.task.build_dataset_for_inference(tokens, lengths)
        batch = None if skip_invalid_size_inputs else self.one_batch(dataset, lengths)
        if batch is not None:
            return [batch]
        return self.task.get_batch_iterator(
            dataset=dataset,
            **self.batching,
            max_positions=self.max_positions,
            ignore_invalid_inputs=skip_invalid_size_inputs,
            disable_iterator_cache=True,
        ).next_epoch_itr(shuffle=False)

    def one_batch(self, dataset, lengths: np.ndarray):
        """The one batch fairseq's iterator makes of ``dataset`` (within the batch size and
        ``max_tokens``, no row empty or over ``input_limit``), collated in the iterator's order;
        else None."""
        rows = len(lengths)
        if not rows or int(lengths.min()) <= 1 or int(lengths.max()) > self.input_limit()[0]:
            return None
        longest = max(dataset.num_tokens(i) for i in range(rows))
        max_sentences, max_tokens = self.batching["max_sentences"], self.batching["max_tokens"]
        if (max_sentences is not None and 0 < max_sentences < rows) or (
            max_tokens is not None and 0 < max_tokens < rows * longest
        ):
            return None
        if rows == 1:
            return one_row(dataset)
        with numpy_seed(ITERATOR_SEED):
            order = dataset.ordered_indices()
        return dataset.collater([dataset[i] for i in order])

    def input_limit(self) -> tuple[int, str]:
        positions = getattr(self.task, "model_positions", None)
        if positions is not None:  # UniLM: source and target share one position table
            return positions - 2, "its positions, less two for the target"
        limit = min(p for p in self.max_positions if p is not None)
        return limit, "its source and target positions"

    def generate_text(self, method, sentences, beam, arguments, options, verbose, **call):
        """The best hypothesis of each input (``inputs.encoded`` with ``call``'s choices),
        decoded; ``""`` for an empty one. ``arguments``: the method's own, named when a keyword of
        ``options`` is unknown."""
        accepted = [*arguments, *(k for k in self.generation_options if k != "_name")]
        refuse_unknown(method, options, accepted)
        limit, why = self.input_limit()
        takes_pieces = self.bpe is None and is_sentencepiece_dictionary(self.src_dict.symbols)

        def encode(sentence: str, index: int):
            if takes_pieces:
                refuse_raw_text(sentence, index, method)
            return self.encode(sentence)

        unk = self.src_dict.unk()
        batch, single, empty, tokens = encoded(
            method, sentences, encode, limit, why, unk, gives='""', **call
        )
        outputs = ["" if i in empty else None for i in range(len(batch))]
        if tokens:
            hypotheses = self.generate(list(tokens.values()), beam, verbose, **options)
            for i, hypos in zip(tokens, hypotheses):
                outputs[i] = self.decode(hypos[0]["tokens"])
        return outputs[0] if single else outputs


class HICMLMHubInterface(TextGenerator):
    """A ``cmlm_hybrid`` checkpoint (``hi_cmlm_transformer``)."""

    # as docs/results/hi-cmlm.md decodes; fairseq's defaults are 11 passes, length beam 1
    DEFAULT_GENERATION = {"iter_decode_max_iter": 9, "iter_decode_with_beam": 3}
    # the length offset, its ramp and the removal of consecutive repeated tokens that
    # from_pretrained sets
    # where it is not given them: chosen together on Multi30k val for the shipped student
    # (reproduction/hi_cmlm/remove_repeats.json, docs/results/hi-cmlm.md)
    DEFAULT_DECODING = {"length_offset": 3, "length_offset_ramp": 9, "remove_repeats": 3}

    # generators kept, one per set of call options (a bound on the sets a server may send)
    KEPT_GENERATORS = 64

    def __init__(self, cfg, task, models):
        super().__init__(cfg, task, models)
        self.projection = VocabularyProjection()
        self.generators = {}

    def generator(self, beam: int, options: dict, prefix_allowed_tokens_fn=None):
        """The mask-predict generator of ``beam`` and ``options``, kept after its first call (it
        holds options only: threads share it), with the interface's one ``projection``."""
        key = (type(beam), beam, prefix_allowed_tokens_fn)
        key += tuple((name, type(value), value) for name, value in sorted(options.items()))
        try:
            generator = self.generators.get(key)
        except TypeError:  # an unhashable option value: built for this call alone
            key = generator = None
        if generator is None:
            generator = super().generator(beam, options, prefix_allowed_tokens_fn)
            generator.projection = self.projection
            if key is not None:
                if len(self.generators) >= self.KEPT_GENERATORS:
                    self.generators = {}
                self.generators[key] = generator
        return generator

    def input_limit(self) -> tuple[int, str]:
        """The source positions, and at most the 255 tokens the length predictor can give."""
        why = f"its source positions and the {MAX_NAT_TARGET_LENGTH} target tokens its length"
        return min(self.max_positions[0], MAX_NAT_TARGET_LENGTH), why + " predictor has"

    def translate(
        self,
        sentences,
        passes: int | None = None,
        length_beam: int | None = None,
        strategy: str | None = None,
        length_offset: int | None = None,
        length_offset_ramp: int | None = None,
        remove_repeats: int | None = None,
        force_passes: bool | None = None,
        allow_empty: bool = True,
        too_long: str = "skip",
        verbose: bool = False,
        **options,
    ):
        """Translate a sentence or a list of them (docs/python-api.md). Unset arguments keep
        ``from_pretrained``'s, else ``DEFAULT_GENERATION``, else the checkpoint's; ``strategy``,
        ``length_offset``, ``length_offset_ramp`` and ``remove_repeats`` are for this call
        alone."""
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
            require_bool("translate", "force_passes", force_passes)
            options["iter_decode_force_max_iter"] = force_passes
        require(
            strategy is None or strategy in HYBRID_STRATEGIES,
            f"translate: strategy {strategy!r} is unknown; choose one of "
            f"{', '.join(HYBRID_STRATEGIES)}",
        )
        decoding = {
            "length_offset": length_offset,
            "length_offset_ramp": length_offset_ramp,
            "remove_repeats": remove_repeats,
        }
        for name, value in decoding.items():
            self.check_integer("translate", name, value)
        arguments = (*HICMLM_ARGUMENTS, "strategy", *decoding)
        with decoding_call(strategy, **decoding):
            outputs = self.generate_text(
                "translate",
                sentences,
                self.generation_options["beam"],
                (*arguments, *CALL_ARGUMENTS),
                options,
                verbose,
                allow_empty=allow_empty,
                too_long=too_long,
            )
        self._warn_emptied(sentences, outputs, length_offset)
        return outputs

    def check_integer(self, method: str, name: str, value) -> None:
        """``value`` None, or an integer in the range of the task's option ``name``."""
        if value is None:
            return
        config = fields(getattr(type(self.task), "__dataclass"))
        bounds = next(f for f in config if f.name == name).metadata["range"]
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(
                f"{method}: {name} must be an integer {bounds}, got "
                f"{type(value).__name__} {value!r}"
            )
        require(value in bounds, f"{method}: {name} must be {bounds}, got {value}")

    def _warn_emptied(self, sentences, outputs, length_offset) -> None:
        """A warning with the share of non-empty inputs whose translation came out empty, where
        a negative length offset (the call's or the model's) cut their predicted lengths."""
        pairs = [(outputs, sentences)] if isinstance(sentences, str) else zip(outputs, sentences)
        given = [output for output, sentence in pairs if sentence.strip() and output is not None]
        empty = sum(not output for output in given)
        if not empty:
            return
        offset = self.task.cfg.length_offset if length_offset is None else length_offset
        if offset < 0:
            warnings.warn(
                f"translate: {empty} of {len(given)} outputs are empty: length_offset={offset} "
                f"cuts every predicted length by {-offset} tokens; give an offset closer to 0 "
                "(0 decodes as the model was trained)",
                stacklevel=3,
            )


class Seq2SeqHubInterface(TextGenerator):
    """A ``translation_prophetnet`` or ``unilm_seq2seq`` checkpoint."""

    def _beam_search(
        self,
        method: str,
        sentences,
        beam: int | None = None,
        allow_empty: bool = True,
        too_long: str = "skip",
        verbose: bool = False,
        **options,
    ):
        """The best beam-search output for a source or a list of them (docs/python-api.md);
        ``options``: generation options by fairseq name."""
        if beam is not None:
            beam = positive_int(method, "beam", beam)
        return self.generate_text(
            method,
            sentences,
            self.generation_options["beam"] if beam is None else beam,
            ("beam", *CALL_ARGUMENTS),
            options,
            verbose,
            allow_empty=allow_empty,
            too_long=too_long,
        )

    summarize = partialmethod(_beam_search, "summarize")
    translate = partialmethod(_beam_search, "translate")  # the name of fairseq's interface

# No "from __future__ import annotations" here: fairseq reads the dataclass field types at run time.
"""``--eval-rouge``: ROUGE-1/2/L F1 of beam-search outputs on the validation split at every
validation (``unilm_seq2seq``, ``translation_prophetnet``), as ``translation`` has ``--eval-bleu``;
scored by ``fairseq_ext.analysis.rouge`` against the targets decoded the same way
(docs/unilm.md)."""

import json
import logging
import os
from argparse import Namespace
from dataclasses import dataclass, fields
from typing import Optional

from fairseq import utils
from fairseq.data import encoders
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.dataclass.configs import GenerationConfig
from fairseq.logging import metrics
from fairseq.tasks.translation import TranslationTask

from fairseq_ext.analysis.rouge import ROUGE_TYPES, f1_sums
from fairseq_ext.common.config_fields import check_config, option, option_value
from fairseq_ext.common.errors import FairseqExtError, require

logger = logging.getLogger(__name__)

# The Gigaword decoding of examples/pretrained/minilm_gigaword.sh and
# examples/prophetnet/gigaword.sh.
GIGAWORD_DECODING = (
    '{"beam": 4, "lenpen": 1.0, "no_repeat_ngram_size": 3, "max_len_a": 0, "max_len_b": 40}'
)
# fairseq-generate's options that its beam search (FairseqTask.build_generator) reads
DECODING_OPTIONS = (
    "beam lenpen unkpen max_len_a max_len_b min_len no_repeat_ngram_size unnormalized temperature "
    "match_source_len sampling sampling_topk sampling_topp diverse_beam_groups "
    "diverse_beam_strength diversity_rate"
).split()
ROUGE_DETOK = ChoiceEnum(["sentencepiece", "wordpiece", "none"])
UNK = "UNK"  # the OOV marker of the Gigaword references (data_prep/gigaword.sh)
# examples/pretrained/minilm_gigaword.sh writes fairseq's <unk> as this before joining pieces
BERT_UNK = "[UNK]"
SENTENCEPIECE_MARK = "\u2581"


@dataclass
class RougeValidationConfig(FairseqDataclass):
    eval_rouge: bool = option(
        False,
        "at every validation, decode the validation split with beam search and log ROUGE-1/2/L "
        "F1 x 100 (rouge1, rouge2, rougeL; fairseq_ext.analysis.rouge) against its targets; with "
        "--best-checkpoint-metric rouge1 --maximize-best-checkpoint-metric [--patience N] the "
        "best checkpoint and early stopping follow validation ROUGE-1",
    )
    eval_rouge_args: str = option(
        GIGAWORD_DECODING,
        "decoding options of --eval-rouge as a JSON object, fairseq-generate's names with "
        "underscores; default: the Gigaword decoding of the examples (beam 4, length penalty "
        "1.0, no repeated trigram, at most 40 tokens)",
    )
    eval_rouge_detok: ROUGE_DETOK = option(
        "sentencepiece",
        "how --eval-rouge turns pieces into text before scoring, as the scripts do: sentencepiece "
        "(fairseq-generate --post-process sentencepiece; data_prep/gigaword.sh), wordpiece (BERT's "
        "## pieces joined by the tokenizer of --eval-rouge-wordpiece-tokenizer, as "
        "data_prep/wordpiece.py decode), none (the pieces are words)",
    )
    eval_rouge_wordpiece_tokenizer: Optional[str] = option(
        None,
        "with --eval-rouge-detok wordpiece: the transformers folder (tokenizer.json or "
        "vocab.txt) whose WordPiece tokenizer encoded the data",
    )
    eval_rouge_print_samples: bool = option(
        False,
        "log the first hypothesis and reference of every validation batch that --eval-rouge "
        "decodes",
    )


# the JSON values that fit a decoding option of each type, and how to say so
VALUE_KINDS = {
    bool: ((bool,), "true or false"),
    int: ((int,), "a whole number"),
    float: ((int, float), "a number"),
}


def decoding_args(text: str) -> Namespace:
    """The options of ``--eval-rouge-args`` (a JSON object of ``DECODING_OPTIONS``) as fairseq's
    ``build_generator`` reads them; bad input is one clear error."""
    example = f"e.g. '{GIGAWORD_DECODING}'"
    try:
        args = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FairseqExtError(
            f"--eval-rouge-args {text!r} is not JSON ({exc.msg}, character {exc.pos + 1}); "
            f"give a JSON object of decoding options, {example}"
        ) from None
    require(
        isinstance(args, dict),
        f"--eval-rouge-args {text!r} is not a JSON object; give one of decoding options, {example}",
    )
    kinds = {f.name: f.type for f in fields(GenerationConfig)}
    for name, value in args.items():
        require(
            name in DECODING_OPTIONS,
            f"--eval-rouge-args: {name!r} is not a decoding option of beam search; "
            f"the options are {', '.join(DECODING_OPTIONS)}",
        )
        types, what = VALUE_KINDS[kinds[name]]
        fits = isinstance(value, types) and isinstance(value, bool) == (kinds[name] is bool)
        require(fits, f"--eval-rouge-args: {name} must be {what}, got {json.dumps(value)}")
    return Namespace(**args)


class PiecesToText:
    """Token ids of ``dictionary`` -> the text a user script scores: fairseq-generate's line
    (``--post-process sentencepiece`` or the pieces as they are), or for WordPiece data the pieces
    joined by the checkpoint's tokenizer (the registered ``--bpe wordpiece``) as
    ``data_prep/wordpiece.py decode`` does; fairseq's ``<unk>`` is the word ``UNK``."""

    def __init__(self, dictionary, detok: str, wordpiece_tokenizer: Optional[str]):
        self.dictionary, self.detok = dictionary, detok
        self.wordpiece = None
        if detok == "sentencepiece":
            require(
                any(SENTENCEPIECE_MARK in s for s in dictionary.symbols),
                "--eval-rouge-detok sentencepiece: no symbol of the target dictionary holds "
                f"sentencepiece's word mark {SENTENCEPIECE_MARK!r}, so the data are not "
                "sentencepiece pieces; use --eval-rouge-detok wordpiece (BERT WordPiece, with "
                "--eval-rouge-wordpiece-tokenizer DIR) or none (words)",
            )
        elif detok == "wordpiece":
            require(
                os.path.isdir(wordpiece_tokenizer),
                f"--eval-rouge-wordpiece-tokenizer {wordpiece_tokenizer} is not a folder; give "
                "the transformers folder (tokenizer.json or vocab.txt) whose tokenizer encoded "
                "the data",
            )
            require(
                any(s.startswith("##") for s in dictionary.symbols),
                "--eval-rouge-detok wordpiece: no symbol of the target dictionary is a ## "
                "continuation piece, so the data are not BERT WordPiece pieces; use "
                "--eval-rouge-detok sentencepiece or none",
            )
            self.wordpiece = encoders.build_bpe(
                Namespace(bpe="wordpiece", wordpiece_tokenizer=wordpiece_tokenizer)
            )

    def __call__(self, tokens, ignore) -> str:
        d = self.dictionary
        if self.wordpiece is not None:
            pieces = d.string(tokens, None, extra_symbols_to_ignore=ignore, unk_string=BERT_UNK)
            return self.wordpiece.decode(pieces).replace(BERT_UNK, UNK)
        text = d.string(
            tokens,
            "sentencepiece" if self.detok == "sentencepiece" else None,
            extra_symbols_to_ignore=ignore,
        )
        # a word of its own, as the marker of the references is: sentencepiece glues <unk> to its
        # neighbours
        return " ".join(text.replace(d.unk_word, f" {UNK} ").split())


class RougeValidation:
    """``--eval-rouge`` of one task (``RougeValidationConfig``), which holds it and calls it from
    its own hooks: ``prepare`` from ``build_model`` (the generator of a model to be trained),
    ``score`` from ``valid_step`` (the F1 sums of a batch), ``reduce`` from ``reduce_metrics``
    (``rouge1``, ``rouge2``, ``rougeL``). Off (``--eval-rouge`` not given), each does nothing."""

    def __init__(self, cfg):
        self.cfg, self.generator, self.text = cfg, None, None
        self.on = bool(getattr(cfg, "eval_rouge", False))  # a configuration saved before it: off
        if not self.on:
            return
        check_config(cfg, RougeValidationConfig)  # before a split is loaded
        decoding_args(cfg.eval_rouge_args)
        detok = option_value(cfg, "eval_rouge_detok")
        require(
            detok == "wordpiece" or not cfg.eval_rouge_wordpiece_tokenizer,
            f"--eval-rouge-wordpiece-tokenizer is for --eval-rouge-detok wordpiece, not {detok}; "
            "drop one of them",
        )
        require(
            detok != "wordpiece" or cfg.eval_rouge_wordpiece_tokenizer,
            "--eval-rouge-detok wordpiece joins pieces with the checkpoint's tokenizer: give "
            "--eval-rouge-wordpiece-tokenizer DIR (the transformers folder whose tokenizer "
            "encoded the data)",
        )

    def prepare(self, task, model, from_checkpoint: bool) -> None:
        """The generator and the text of ``model``; a model loaded to decode is not validated."""
        if self.on and not from_checkpoint:
            self._start(task, model)

    def _start(self, task, model) -> None:
        self.text = PiecesToText(
            task.target_dictionary,
            option_value(self.cfg, "eval_rouge_detok"),
            self.cfg.eval_rouge_wordpiece_tokenizer,
        )
        try:
            self.generator = task.build_generator([model], decoding_args(self.cfg.eval_rouge_args))
        except FairseqExtError as exc:
            raise FairseqExtError(f"--eval-rouge-args: {exc}") from None

    def texts(self, task, sample, model) -> tuple[list[str], list[str]]:
        """The best hypothesis of each sentence of ``sample`` and its target, as text."""
        if self.generator is None:  # fairseq-validate on a checkpoint trained with --eval-rouge
            self._start(task, model)
        generator = self.generator
        ignore = getattr(generator, "symbols_to_strip_from_output", {generator.eos})
        outputs = task.inference_step(generator, [model], sample, prefix_tokens=None)
        pad = task.target_dictionary.pad()
        hyps = [self.text(out[0]["tokens"].int().cpu(), ignore) for out in outputs]
        refs = [self.text(utils.strip_pad(t, pad).int().cpu(), ignore) for t in sample["target"]]
        if self.cfg.eval_rouge_print_samples:
            logger.info("example hypothesis: %s", hyps[0])
            logger.info("example reference: %s", refs[0])
        return hyps, refs

    def score(self, task, sample, model, logging_output: dict) -> None:
        """Adds the batch's per-sentence F1 sums and sentence count to ``logging_output``."""
        if not self.on:
            return
        hyps, refs = self.texts(task, sample, model)
        for name, total in f1_sums(hyps, refs).items():
            logging_output[f"_{name}_f1_sum"] = total
        logging_output["_rouge_sentences"] = len(refs)

    def reduce(self, logging_outputs) -> None:
        """``rouge1``, ``rouge2``, ``rougeL``: the summed F1 over the summed sentence count, x
        100."""
        keys = ["_rouge_sentences"] + [f"_{name}_f1_sum" for name in ROUGE_TYPES]
        totals = {key: float(sum(log.get(key, 0) for log in logging_outputs)) for key in keys}
        if not self.on or totals["_rouge_sentences"] <= 0:  # training batches, or none scored
            return
        for key, total in totals.items():
            metrics.log_scalar(key, total)
        for name in ROUGE_TYPES:
            metrics.log_derived(
                name,
                lambda meters, name=name: (
                    100.0 * meters[f"_{name}_f1_sum"].sum / meters["_rouge_sentences"].sum
                ),
            )


def valid_step(task, sample, model, criterion):
    """``TranslationTask.valid_step``, and with ``--eval-rouge`` the batch's ROUGE F1 sums: the
    hook of a task that holds a ``RougeValidation`` as ``rouge`` (``valid_step = valid_step``)."""
    loss, sample_size, logging_output = TranslationTask.valid_step(task, sample, model, criterion)
    task.rouge.score(task, sample, model, logging_output)
    return loss, sample_size, logging_output


def reduce_metrics(task, logging_outputs, criterion):
    """``TranslationTask.reduce_metrics``, and with ``--eval-rouge`` rouge1, rouge2 and rougeL."""
    TranslationTask.reduce_metrics(task, logging_outputs, criterion)
    task.rouge.reduce(logging_outputs)

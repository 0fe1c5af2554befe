# No "from __future__ import annotations" here: fairseq reads the dataclass field types at run time.
"""Task ``unilm_seq2seq``: sequence-to-sequence on one BERT-like stack (Su 2019, section
"Seq2Seq"): a pair becomes ``<s> source </s> target </s>`` with segment ids under the prefix
mask, on fairseq's ``translation`` data with RoBERTa's ``<mask>``, ``--keep-tokens``, beam search
that stays within the positions table and validation ROUGE (``--eval-rouge``,
``tasks.rouge_validation``)."""

import logging
from dataclasses import dataclass
from typing import Optional

from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationTask

from fairseq_ext.common.config_fields import option
from fairseq_ext.common.errors import FairseqExtError, require
from fairseq_ext.common.interfaces import UniLMTask
from fairseq_ext.data.interactive_input import InteractiveInputLines, inference_dataset_hook
from fairseq_ext.data.keep_tokens import (
    RemapTokensDataset,
    count_unmapped,
    prune_dictionary,
    read_keep_list,
)
from fairseq_ext.data.mask_symbol import load_with_mask_symbol
from fairseq_ext.data.size_checks import (
    check_pair_split,
    first_bad_row,
    refuse_truncated_binaries,
    refuse_unnamed_language_pair,
)
from fairseq_ext.data.unsorted_batches import UnsortedBatchesConfig, in_batch_order
from fairseq_ext.generation import UniLMSequenceGenerator
from fairseq_ext.generation.decoding_options import check_beam_search_options
from fairseq_ext.models.unilm_init import prepare_unilm_model
from fairseq_ext.tasks import rouge_validation
from fairseq_ext.tasks.base import PluginTask
from fairseq_ext.tasks.rouge_validation import RougeValidation, RougeValidationConfig

logger = logging.getLogger(__name__)


@dataclass
class UniLMSeq2SeqConfig(RougeValidationConfig, UnsortedBatchesConfig):
    keep_tokens: Optional[str] = option(
        None,
        "keep only these vocabulary tokens (one per line, e.g. a dict.txt) in the dictionary, "
        "embedding and output layer; pass the same FILE to fairseq-generate",
    )


def source_fills_table(split: str, row: int, size: int, positions: int) -> FairseqExtError:
    return FairseqExtError(
        f"{split} source line {row + 1} has {size} tokens with </s>; with <s> that is {size + 1} "
        f"of the model's {positions} positions (--max-positions), leaving none for the target: "
        "filter or shorten long sources (data_prep/spm.py clean-pair --max-words), or train a "
        "model with more positions"
    )


@register_task("unilm_seq2seq", dataclass=UniLMSeq2SeqConfig)
class UniLMSeq2SeqTask(PluginTask, UniLMTask, TranslationTask):
    """UniLM seq2seq: ``<s> source </s> target </s>`` on one ``unilm_transformer`` stack."""

    cfg: UniLMSeq2SeqConfig
    build_dataset_for_inference = inference_dataset_hook(TranslationTask)
    valid_step = rouge_validation.valid_step
    reduce_metrics = rouge_validation.reduce_metrics
    load_dictionary = staticmethod(load_with_mask_symbol)  # with RoBERTa's <mask>

    def __init__(self, cfg: UniLMSeq2SeqConfig, src_dict, tgt_dict):
        require(
            src_dict.symbols == tgt_dict.symbols,
            f"unilm_seq2seq reads source and target with one embedding, so {cfg.data} needs one "
            "dictionary for both sides: run fairseq-preprocess with --joined-dictionary",
        )
        self.full_dictionary = src_dict
        self.keep_ids = self.lookup = None
        self.model_positions: Optional[int] = None  # the one positions table, once built
        self.input_lines = InteractiveInputLines(self.check_input_length)
        if cfg.keep_tokens:
            pruned, self.keep_ids, self.lookup = prune_dictionary(
                src_dict, read_keep_list(cfg.keep_tokens), f"--keep-tokens {cfg.keep_tokens}"
            )
            logger.info(
                "--keep-tokens %s: %d of %d vocabulary entries kept",
                cfg.keep_tokens,
                len(pruned),
                len(src_dict),
            )
            src_dict = pruned
        super().__init__(cfg, src_dict, src_dict)
        self.rouge = RougeValidation(cfg)

    def default_attention_mask(self) -> str:
        """UniLM's seq2seq mask: bidirectional source, causal target (``UniLMTask``)."""
        return "prefix"

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        refuse_unnamed_language_pair(cfg)
        return super().setup_task(cfg, **kwargs)

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        refuse_truncated_binaries(self.cfg.data, split)
        # the data's ids are the full dictionary's; fairseq reads only the specials of the task's
        # dictionary, which keep their ids under --keep-tokens
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        dataset = self.datasets[split]
        unk = self.full_dictionary.unk()
        evaluation = split != self.cfg.train_subset
        check_pair_split(dataset, split=split, data=self.cfg.data, unk=unk, evaluation=evaluation)
        if self.lookup is not None:
            for side in ("src", "tgt"):
                lost, total = count_unmapped(getattr(dataset, side), self.lookup, unk)
                if lost:
                    logger.warning(
                        f"{split} {side}: {lost} of {total} tokens ({100.0 * lost / total:.2f}%) "
                        f"are not in --keep-tokens {self.cfg.keep_tokens} and became <unk>"
                    )
                setattr(dataset, side, RemapTokensDataset(getattr(dataset, side), self.lookup))
        self.datasets[split] = in_batch_order(dataset, self.cfg)

    def get_batch_iterator(self, dataset, **options):
        """Every pair fits the model's positions (``check_model_positions``, once the model is
        built), and every example is in a batch (``PluginTask``)."""
        if self.model_positions is not None:
            self.check_model_positions(dataset, self.model_positions)
        return super().get_batch_iterator(dataset, **options)

    def check_model_positions(self, dataset, P: int) -> None:
        """Every pair must fit the one positions table: 1 (<s>) + source + target - 1."""
        if not hasattr(dataset, "src_sizes"):
            return
        split = next((s for s, d in self.datasets.items() if d is dataset), "input")
        row = first_bad_row(dataset.src_sizes + 2 > P)
        if row is not None:
            raise source_fills_table(split, row, int(dataset.src_sizes[row]), P)
        if dataset.tgt_sizes is not None:
            total = dataset.src_sizes + dataset.tgt_sizes
            row = first_bad_row(total > P)
            if row is not None:
                raise FairseqExtError(
                    f"{split} line {row + 1}: the source ({int(dataset.src_sizes[row])} tokens "
                    f"with </s>) and target ({int(dataset.tgt_sizes[row])} with </s>) need "
                    f"{int(total[row])} positions, more than the model's {P} (--max-positions); "
                    "filter or shorten such pairs"
                )

    def check_input_length(self, line: int, length: int) -> None:
        """An input line must leave the target a position of the one table."""
        if self.model_positions is not None and length + 2 > self.model_positions:
            raise source_fills_table("input", line - 1, length, self.model_positions)

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        prepare_unilm_model(
            model,
            cfg,
            task="unilm_seq2seq",
            dictionary=self.full_dictionary,
            keep_ids=self.keep_ids,
            from_checkpoint=from_checkpoint,
        )
        self.model_positions = model.encoder.max_positions()
        self.rouge.prepare(self, model, from_checkpoint)
        return model

    def build_generator(self, models, args, seq_gen_cls=None, extra_gen_cls_kwargs=None, **kwargs):
        """Beam search within the positions table (``UniLMSequenceGenerator``), for decoding
        options in range only."""
        check_beam_search_options(args, len(self.target_dictionary))
        return super().build_generator(
            models,
            args,
            seq_gen_cls=seq_gen_cls or UniLMSequenceGenerator,
            extra_gen_cls_kwargs=extra_gen_cls_kwargs,
            **kwargs,
        )

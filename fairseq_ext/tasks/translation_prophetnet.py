# No "from __future__ import annotations" here: fairseq reads the dataclass field types at run time.
"""Task ``translation_prophetnet``: fine-tuning and beam-search generation of ProphetNet on
source/target pairs (Qi et al. 2020, section 3.2), on fairseq's ``translation`` with the
pre-training dictionary's ``<mask>``, checks that refuse what the model cannot honour, and
validation ROUGE (``--eval-rouge``, ``tasks.rouge_validation``)."""

from dataclasses import dataclass

from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationTask

from fairseq_ext.common.errors import require
from fairseq_ext.data import InteractiveInputLines, refuse_beyond_source_positions
from fairseq_ext.data.mask_symbol import load_with_mask_symbol
from fairseq_ext.data.size_checks import (
    note_unknown_share,
    refuse_empty_lines,
    refuse_long_lines,
    refuse_truncated_binaries,
    refuse_unnamed_language_pair,
)
from fairseq_ext.data.unsorted_batches import UnsortedBatchesConfig, in_batch_order
from fairseq_ext.generation.decoding_options import check_beam_search_options
from fairseq_ext.tasks.base import PluginTask
from fairseq_ext.tasks.rouge_validation import RougeValidation, RougeValidationConfig


@dataclass
class TranslationProphetNetConfig(RougeValidationConfig, UnsortedBatchesConfig):
    """fairseq's ``translation`` options with ``--unsorted-batches`` and ``--eval-rouge``."""


@register_task("translation_prophetnet", dataclass=TranslationProphetNetConfig)
class TranslationProphetNetTask(PluginTask, TranslationTask):
    """Sequence-to-sequence fine-tuning and generation for ProphetNet."""

    cfg: TranslationProphetNetConfig

    def __init__(self, cfg: TranslationProphetNetConfig, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        self.input_lines = InteractiveInputLines()
        self.rouge = RougeValidation(cfg)

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        # The decoder reads a right-padded target: padding comes after every real token, so
        # the causal attention never sees it and positions count from the start.
        require(
            not getattr(cfg, "left_pad_target", False),
            "translation_prophetnet needs right-padded targets; drop --left-pad-target",
        )
        refuse_unnamed_language_pair(cfg)
        return super().setup_task(cfg, **kwargs)

    @classmethod
    def load_dictionary(cls, filename):
        return load_with_mask_symbol(filename)

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        refuse_truncated_binaries(self.cfg.data, split)
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        dataset = self.datasets[split]
        sides = [
            ("source", dataset.src_sizes, self.cfg.max_source_positions, "--max-source-positions")
        ]
        if dataset.tgt_sizes is not None:
            sides.append(
                (
                    "target",
                    dataset.tgt_sizes,
                    self.cfg.max_target_positions,
                    "--max-target-positions",
                )
            )
        for side, sizes, limit, option in sides:
            refuse_empty_lines(sizes, split=split, row_name=f"{side} line", data=self.cfg.data)
            if side == "target" or not self.cfg.truncate_source:
                refuse_long_lines(
                    sizes, split=split, row_name=f"{side} line", limit=limit, option=option
                )
        if split != self.cfg.train_subset:
            for side, tokens in (("source", dataset.src), ("target", dataset.tgt)):
                if tokens is not None:
                    note_unknown_share(
                        tokens, self.src_dict.unk(), split=split, side=side, data=self.cfg.data
                    )
        self.datasets[split] = in_batch_order(dataset, self.cfg)

    def build_model(self, cfg, from_checkpoint=False):
        """With ``--eval-rouge``, the generator that validation decodes with
        (``RougeValidation``)."""
        model = super().build_model(cfg, from_checkpoint)
        self.rouge.prepare(self, model, from_checkpoint)
        return model

    def valid_step(self, sample, model, criterion):
        """fairseq's, and with ``--eval-rouge`` the batch's ROUGE F1 sums (``RougeValidation``)."""
        loss, sample_size, logging_output = super().valid_step(sample, model, criterion)
        self.rouge.score(self, sample, model, logging_output)
        return loss, sample_size, logging_output

    def reduce_metrics(self, logging_outputs, criterion):
        """fairseq's, and with ``--eval-rouge`` rouge1, rouge2 and rougeL (``RougeValidation``)."""
        super().reduce_metrics(logging_outputs, criterion)
        self.rouge.reduce(logging_outputs)

    def build_dataset_for_inference(self, src_tokens, src_lengths, constraints=None):
        """Interactive input: empty lines skipped, lines beyond ``--max-source-positions``
        refused."""
        return self.input_lines.dataset(
            super().build_dataset_for_inference,
            src_tokens,
            src_lengths,
            constraints,
            refuse_beyond_source_positions(self.cfg.max_source_positions),
        )

    def build_generator(self, models, args, seq_gen_cls=None, extra_gen_cls_kwargs=None, **kwargs):
        """fairseq's beam search, for decoding options in range only."""
        check_beam_search_options(args, len(self.target_dictionary))
        return super().build_generator(
            models,
            args,
            seq_gen_cls=seq_gen_cls,
            extra_gen_cls_kwargs=extra_gen_cls_kwargs,
            **kwargs,
        )

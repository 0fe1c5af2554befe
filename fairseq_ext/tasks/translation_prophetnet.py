# No "from __future__ import annotations" here: fairseq reads the dataclass field types at run time.
"""Task ``translation_prophetnet``: fine-tuning and beam-search generation of ProphetNet on
source/target pairs (Qi et al. 2020, section 3.2), on fairseq's ``translation`` with the
pre-training dictionary's ``<mask>``, checks that refuse what the model cannot honour, and
validation ROUGE (``--eval-rouge``, ``tasks.rouge_validation``)."""

from dataclasses import dataclass

from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationTask

from fairseq_ext.common.errors import require
from fairseq_ext.data.interactive_input import (
    InteractiveInputLines,
    inference_dataset_hook,
    refuse_beyond_source_positions,
)
from fairseq_ext.data.mask_symbol import load_with_mask_symbol
from fairseq_ext.data.size_checks import (
    check_pair_split,
    refuse_truncated_binaries,
    refuse_unnamed_language_pair,
)
from fairseq_ext.data.unsorted_batches import UnsortedBatchesConfig, in_batch_order
from fairseq_ext.generation.decoding_options import check_beam_search_options
from fairseq_ext.tasks import rouge_validation
from fairseq_ext.tasks.base import PluginTask
from fairseq_ext.tasks.rouge_validation import RougeValidation, RougeValidationConfig


@dataclass
class TranslationProphetNetConfig(RougeValidationConfig, UnsortedBatchesConfig):
    """fairseq's ``translation`` options with ``--unsorted-batches`` and ``--eval-rouge``."""


@register_task("translation_prophetnet", dataclass=TranslationProphetNetConfig)
class TranslationProphetNetTask(PluginTask, TranslationTask):
    """Sequence-to-sequence fine-tuning and generation for ProphetNet."""

    cfg: TranslationProphetNetConfig
    build_dataset_for_inference = inference_dataset_hook(TranslationTask)
    valid_step = rouge_validation.valid_step
    reduce_metrics = rouge_validation.reduce_metrics
    load_dictionary = staticmethod(load_with_mask_symbol)  # with RoBERTa's <mask>

    def __init__(self, cfg: TranslationProphetNetConfig, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        self.input_lines = InteractiveInputLines(
            refuse_beyond_source_positions(cfg.max_source_positions)
        )
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

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        refuse_truncated_binaries(self.cfg.data, split)
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        dataset, cfg = self.datasets[split], self.cfg
        source = ("source", dict(limit=cfg.max_source_positions, option="--max-source-positions"))
        target = ("target", dict(limit=cfg.max_target_positions, option="--max-target-positions"))
        check_pair_split(
            dataset,
            split=split,
            data=cfg.data,
            unk=self.src_dict.unk(),
            evaluation=split != cfg.train_subset,
            long_lines=(target,) if cfg.truncate_source else (source, target),
        )
        self.datasets[split] = in_batch_order(dataset, self.cfg)

    def build_model(self, cfg, from_checkpoint=False):
        """With ``--eval-rouge``, the generator that validation decodes with
        (``RougeValidation``)."""
        model = super().build_model(cfg, from_checkpoint)
        self.rouge.prepare(self, model, from_checkpoint)
        return model

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

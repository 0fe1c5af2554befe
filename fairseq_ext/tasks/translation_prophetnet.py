"""Task ``translation_prophetnet``: fine-tune ProphetNet on source/target pairs (Qi et al. 2020,
section 3.2: summarization, question generation).

fairseq's ``translation`` task (binarized pairs made by fairseq-preprocess, from
sentencepiece pieces or with an existing dictionary via ``--srcdict``/``--tgtdict``), plus:

* the dictionaries get a ``<mask>`` symbol, as in ``prophetnet_denoising``, so a pre-trained
  checkpoint has the same embedding table and loads with ``--finetune-from-model``;
* every example is batched (``CompleteBatchesTaskMixin``);
* ``--unsorted-batches``: batches cut from the pairs in a random order instead of fairseq's
  order by length (``data.unsorted_batches``: why table 2 uses it);
* empty source or target lines (a target of length 1 is only ``</s>``), lines longer than
  the model's positions and an incomplete ``.bin`` are refused with a clear message, not
  skipped or truncated; so is ``--left-pad-target`` (the decoder needs padding after the
  target). An empty line of ``fairseq-interactive`` input is answered and skipped.

Generation is fairseq's beam search, for decoding options in range
(``generation.decoding_options``); ProphetNet's decoder then runs its main stream and the
next-token stream only (``models.prophetnet``).
"""
from fairseq.data import Dictionary
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationTask

from fairseq_ext.data import CompleteBatchesTaskMixin, InteractiveInputTaskMixin
from fairseq_ext.data.unsorted_batches import UnsortedBatchesConfig, in_batch_order
from fairseq_ext.data.size_checks import refuse_empty_lines, refuse_long_lines, refuse_truncated_binaries
from fairseq_ext.errors import require
from fairseq_ext.generation.decoding_options import CheckedBeamSearchTaskMixin

MASK_SYMBOL = "<mask>"


def with_mask_symbol(dictionary: Dictionary) -> Dictionary:
    """Add ``<mask>`` (the last symbol) unless the dictionary has it already."""
    dictionary.add_symbol(MASK_SYMBOL)
    return dictionary


@register_task("translation_prophetnet", dataclass=UnsortedBatchesConfig)
class TranslationProphetNetTask(CheckedBeamSearchTaskMixin, InteractiveInputTaskMixin, CompleteBatchesTaskMixin,
                                TranslationTask):
    """Sequence-to-sequence fine-tuning and generation for ProphetNet."""

    cfg: UnsortedBatchesConfig

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        # The decoder reads a right-padded target: padding comes after every real token, so
        # the causal attention never sees it and positions count from the start.
        require(not getattr(cfg, "left_pad_target", False),
                "translation_prophetnet needs right-padded targets; drop --left-pad-target")
        return super().setup_task(cfg, **kwargs)

    @classmethod
    def load_dictionary(cls, filename):
        return with_mask_symbol(Dictionary.load(filename))

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        refuse_truncated_binaries(self.cfg.data, split)
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        dataset = self.datasets[split]
        sides = [("source", dataset.src_sizes, self.cfg.max_source_positions, "--max-source-positions")]
        if dataset.tgt_sizes is not None:
            sides.append(("target", dataset.tgt_sizes, self.cfg.max_target_positions, "--max-target-positions"))
        for side, sizes, limit, option in sides:
            refuse_empty_lines(sizes, split=split, row_name=f"{side} line", data=self.cfg.data)
            if side == "target" or not self.cfg.truncate_source:
                refuse_long_lines(sizes, split=split, row_name=f"{side} line", limit=limit, option=option)
        self.datasets[split] = in_batch_order(dataset, self.cfg)

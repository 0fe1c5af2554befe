# No "from __future__ import annotations" here: fairseq reads the dataclass field types at run time.
"""Task ``cmlm_hybrid``: CMLM / HI-CMLM training and mask-predict decoding.

Builds on fairseq's ``translation_lev`` (data loading with <s>, the NAT criterion
``nat_loss``) and adds:

* training noise from ``masking.uniform_count_mask`` (paper section 2.3: the number of
  masked target tokens is uniform, then their positions are uniform);
* ``--eval-bleu``: validation runs mask-predict (options in ``--eval-bleu-args``, e.g.
  ``'{"iter_decode_max_iter": 9, "iter_decode_with_beam": 3}'``) and scores with sacrebleu;
* ``MaskPredictGenerator`` for ``fairseq-generate``/``fairseq-interactive``;
* no example is ever dropped from a batch (``CompleteBatchesTaskMixin``), and data that
  the model cannot honour (empty lines, targets longer than the length predictor's 255
  classes) is refused with a clear message instead of being skipped or clamped.
"""
import logging
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import torch
from fairseq.dataclass import ChoiceEnum
from fairseq.tasks import register_task
from fairseq.tasks.translation import EVAL_BLEU_ORDER
from fairseq.tasks.translation_lev import TranslationLevenshteinConfig, TranslationLevenshteinTask

from fairseq_ext.data import CompleteBatchesTaskMixin
from fairseq_ext.errors import FairseqExtError, require
from fairseq_ext.generation import MaskPredictGenerator
from fairseq_ext.masking import uniform_count_mask
from fairseq_ext.models.hi_cmlm_transformer import MAX_NAT_TARGET_LENGTH

logger = logging.getLogger(__name__)

CMLM_NOISE = ChoiceEnum(["random_mask", "full_mask", "no_noise"])


@dataclass
class CMLMHybridConfig(TranslationLevenshteinConfig):
    noise: CMLM_NOISE = field(
        default="random_mask",
        metadata={"help": "random_mask: CMLM's uniform number of masked target tokens; "
                          "full_mask: mask every target token; no_noise: none"},
    )
    init_encoder_from: Optional[str] = field(
        default=None,
        metadata={"help": "start training with the encoder (and shared embeddings) of this fairseq "
                          "checkpoint, e.g. the autoregressive teacher; same sizes and dictionary"},
    )
    init_decoder_from: Optional[str] = field(
        default=None,
        metadata={"help": "start training with every decoder weight of this checkpoint that the "
                          "CMLM decoder has under the same name (an autoregressive decoder's layers; "
                          "the length predictor stays new)"},
    )


def _first_bad(bad: np.ndarray) -> Optional[int]:
    idx = np.flatnonzero(bad)
    return int(idx[0]) if len(idx) else None


@register_task("cmlm_hybrid", dataclass=CMLMHybridConfig)
class CMLMHybridTask(CompleteBatchesTaskMixin, TranslationLevenshteinTask):
    """Conditional masked LM translation with a hybrid decoder input (HI-CMLM)."""

    cfg: CMLMHybridConfig

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        self._check_sizes(split, self.datasets[split])

    def _check_sizes(self, split: str, dataset) -> None:
        """Refuse what would otherwise be skipped, clamped or learnt as garbage."""
        # Sizes count <s> and </s>, so an empty line has size 2.
        for side, sizes in (("source", dataset.src_sizes), ("target", dataset.tgt_sizes)):
            if sizes is None:
                continue
            row = _first_bad(sizes <= 2)
            if row is not None:
                n = int((sizes <= 2).sum())
                raise FairseqExtError(
                    f"{split} {side} line {row + 1} is empty ({n} empty {side} line(s) in "
                    f"{self.cfg.data}); remove empty pairs before fairseq-preprocess "
                    "(data_prep/spm.py clean-pair does this for training data)"
                )
        limit = min(self.cfg.max_target_positions, MAX_NAT_TARGET_LENGTH)
        if dataset.tgt_sizes is not None:
            row = _first_bad(dataset.tgt_sizes > limit)
            if row is not None:
                raise FairseqExtError(
                    f"{split} target line {row + 1} has {int(dataset.tgt_sizes[row])} tokens "
                    f"with <s> and </s>, more than the {limit} a CMLM can predict (its length "
                    "predictor has 256 classes; see also --max-target-positions); split or "
                    "filter long sentences before fairseq-preprocess"
                )
        row = _first_bad(dataset.src_sizes > self.cfg.max_source_positions)
        if row is not None:
            raise FairseqExtError(
                f"{split} source line {row + 1} has {int(dataset.src_sizes[row])} tokens, more than "
                f"--max-source-positions {self.cfg.max_source_positions}; raise it or filter the data"
            )

    def build_dataset_for_inference(self, src_tokens, src_lengths, constraints=None):
        # fairseq-interactive calls this once per buffer of input lines, in input order;
        # counting across calls gives the user the line number in their input.
        seen = self.__dict__.get("_inference_lines_seen", 0)
        for i, length in enumerate(src_lengths):
            line = seen + i + 1
            require(int(length) > 1, f"input line {line} is empty; mask-predict needs a source "
                                     "sentence (remove empty lines from the input)")
            require(int(length) <= self.cfg.max_source_positions,
                    f"input line {line} has {int(length)} tokens, more than --max-source-positions "
                    f"{self.cfg.max_source_positions}")
        self._inference_lines_seen = seen + len(src_lengths)
        return super().build_dataset_for_inference(src_tokens, src_lengths, constraints=constraints)

    def inject_noise(self, target_tokens):
        """Decoder input for training: masked target slots become <unk> (the CMLM mask)."""
        d = self.tgt_dict
        maskable = target_tokens.ne(d.pad()) & target_tokens.ne(d.bos()) & target_tokens.ne(d.eos())
        if self.cfg.noise == "random_mask":
            masked = uniform_count_mask(maskable)
        elif self.cfg.noise == "full_mask":
            masked = maskable
        else:
            return target_tokens
        return target_tokens.masked_fill(masked, d.unk())

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        if not from_checkpoint:
            if self.cfg.init_encoder_from:
                init_part_from_checkpoint(model, "encoder", self.cfg.init_encoder_from)
            if self.cfg.init_decoder_from:
                init_part_from_checkpoint(model, "decoder", self.cfg.init_decoder_from)
        return model

    def build_generator(self, models, args, **unused):
        return MaskPredictGenerator(
            self.target_dictionary,
            eos_penalty=getattr(args, "iter_decode_eos_penalty", 0.0),
            max_iter=getattr(args, "iter_decode_max_iter", 10),
            beam_size=getattr(args, "iter_decode_with_beam", 1),
            reranking=getattr(args, "iter_decode_with_external_reranker", False),
            decoding_format=getattr(args, "decoding_format", None),
            adaptive=not getattr(args, "iter_decode_force_max_iter", False),
            retain_history=getattr(args, "retain_iter_history", False),
        )

    def valid_step(self, sample, model, criterion):
        loss, sample_size, logging_output = super().valid_step(sample, model, criterion)
        if self.cfg.eval_bleu:
            bleu = self._inference_with_bleu(self.sequence_generator, sample, model)
            logging_output["_bleu_sys_len"] = bleu.sys_len
            logging_output["_bleu_ref_len"] = bleu.ref_len
            for i in range(EVAL_BLEU_ORDER):
                logging_output[f"_bleu_counts_{i}"] = bleu.counts[i]
                logging_output[f"_bleu_totals_{i}"] = bleu.totals[i]
        return loss, sample_size, logging_output


def init_part_from_checkpoint(model, part: str, path: str) -> None:
    """Copy ``encoder.*`` or ``decoder.*`` weights of a fairseq checkpoint (e.g. the
    autoregressive teacher) into ``model.encoder`` / ``model.decoder``. The encoder must match
    entirely; the decoder takes every weight present under its own name (a CMLM decoder is an
    autoregressive decoder without the causal mask, plus a length predictor that stays new).
    With shared embeddings this also sets the other side's embeddings."""
    from fairseq import checkpoint_utils

    option = f"--init-{part}-from {path}"
    state = checkpoint_utils.load_checkpoint_to_cpu(path)["model"]
    prefix = f"{part}."
    theirs = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
    own = getattr(model, part).state_dict()
    if part == "encoder":
        missing = sorted(set(own) - set(theirs))
        require(not missing, f"{option}: the checkpoint lacks encoder weights {missing[:3]}...; it "
                             "needs the same encoder architecture")
    shared = [name for name in own if name in theirs]
    require(any(".layers." in f".{name}" for name in shared),
            f"{option}: the checkpoint has no {part} layers under the names of this model")
    for name in shared:
        require(theirs[name].shape == own[name].shape,
                f"{option}: {part}.{name} has shape {tuple(theirs[name].shape)} there and "
                f"{tuple(own[name].shape)} here; the checkpoint needs the same {part} sizes and dictionary")
    with torch.no_grad():
        getattr(model, part).load_state_dict({**own, **{k: theirs[k] for k in shared}}, strict=True)
    kept = sorted(set(own) - set(shared))
    logger.info("initialised the %s from %s%s", part, path,
                f" (kept new: {', '.join(kept)})" if kept else "")

# No "from __future__ import annotations" here: fairseq reads the dataclass field types at run time.
"""Task ``cmlm_hybrid``: CMLM / HI-CMLM training with CMLM's uniform-count target masking
(Ghazvininejad et al. 2019, section 3; Wang et al. 2021, section 2.3), validation BLEU and
mask-predict decoding, on fairseq's ``translation_lev``; data the model cannot honour is
refused, never skipped or clamped."""

from dataclasses import dataclass
from typing import Optional

from fairseq.dataclass import ChoiceEnum
from fairseq.models.nat import CMLMNATransformerModel
from fairseq.tasks import register_task
from fairseq.tasks.translation import EVAL_BLEU_ORDER
from fairseq.tasks.translation_lev import TranslationLevenshteinConfig, TranslationLevenshteinTask

from fairseq_ext.checkpoints.starting import init_part_from_checkpoint
from fairseq_ext.common.config_fields import Range, check_config, flag, option
from fairseq_ext.common.errors import require
from fairseq_ext.data.interactive_input import (
    InteractiveInputLines,
    inference_dataset_hook,
    refuse_beyond_source_positions,
)
from fairseq_ext.data.size_checks import (
    check_pair_split,
    refuse_missing_dictionary,
    refuse_truncated_binaries,
    refuse_unnamed_language_pair,
)
from fairseq_ext.generation import MaskPredictGenerator, lean_mask_predict
from fairseq_ext.generation.decoding_options import check_mask_predict_options, generation_option
from fairseq_ext.generation.int8 import quantize_for_decoding
from fairseq_ext.masking import uniform_count_mask
from fairseq_ext.models.hi_cmlm_transformer import MAX_NAT_TARGET_LENGTH
from fairseq_ext.tasks.base import PluginTask

CMLM_NOISE = ChoiceEnum(["random_mask", "full_mask", "no_noise"])


@dataclass
class CMLMHybridConfig(TranslationLevenshteinConfig):
    noise: CMLM_NOISE = option(
        "random_mask",
        "random_mask: CMLM's uniform number of masked target tokens; "
        "full_mask: mask every target token; no_noise: none",
    )
    init_encoder_from: Optional[str] = option(
        None,
        "start training with the encoder (and shared embeddings) of this fairseq "
        "checkpoint, e.g. the autoregressive teacher; same sizes and dictionary",
    )
    init_decoder_from: Optional[str] = option(
        None,
        "start training with every decoder weight of this checkpoint that the CMLM decoder has "
        "under the same name (an autoregressive decoder's layers; the length predictor stays new)",
    )
    length_offset: int = option(
        0,
        "decoding: tokens added to every predicted target length before the length beam (0: "
        "mask-predict as Ghazvininejad et al. 2019 decode); a length predictor trained on "
        "distilled targets predicts short translations, and docs/results/speed.md chooses the "
        "offset on Multi30k val; hi_cmlm_transformer only",
        range=Range(-16, 16),
    )
    length_offset_ramp: int = option(
        0,
        "decoding: a predicted length of fewer than T tokens (not counting <s> and </s>) gets "
        "--length-offset one token nearer 0 for each token it has fewer, down to none: the "
        "offset lengthens the translations the length predictor makes too short, not those of "
        "inputs of a few words (0: the offset at every length); docs/results/hi-cmlm.md "
        "chooses it on Multi30k val; hi_cmlm_transformer only",
        range=Range(0, 255),
    )
    remove_repeats: int = option(
        0,
        "decoding: after mask-predict's last pass, remove each span of at most N tokens that "
        "repeats the span just before it (1: each token equal to the one before it, as Lee et al. "
        "2018's and DA-Transformer's non-autoregressive decoders; 2 and more: also the pieces "
        "of a repeated word); 0: none; docs/results/hi-cmlm.md chooses it with --length-offset "
        "on Multi30k val",
        range=Range(0, 8),
    )
    int8_decoding: bool = option(
        False,
        "decode on the CPU with int8 weights (torch's dynamic quantisation of every "
        "Linear layer, as CTranslate2's int8): faster mask-predict, outputs not "
        "identical (the BLEU change is measured in docs/results/speed.md); "
        "fairseq-generate, fairseq-interactive and the hub only",
    )


@register_task("cmlm_hybrid", dataclass=CMLMHybridConfig)
class CMLMHybridTask(PluginTask, TranslationLevenshteinTask):
    """Conditional masked LM translation with a hybrid decoder input (HI-CMLM)."""

    cfg: CMLMHybridConfig
    build_dataset_for_inference = inference_dataset_hook(TranslationLevenshteinTask)

    def __init__(self, cfg: CMLMHybridConfig, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        self.input_lines = InteractiveInputLines(
            refuse_beyond_source_positions(cfg.max_source_positions)
        )

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        check_config(cfg, CMLMHybridConfig)
        refuse_unnamed_language_pair(cfg)
        return super().setup_task(cfg, **kwargs)

    @classmethod
    def load_dictionary(cls, filename):
        refuse_missing_dictionary(filename)
        return super().load_dictionary(filename)

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        refuse_truncated_binaries(self.cfg.data, split)
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        limit = min(self.cfg.max_target_positions, MAX_NAT_TARGET_LENGTH)
        target = dict(
            limit=limit,
            markers=("<s>", "</s>"),
            limit_name=f"the {limit} a CMLM can predict: its length predictor has 256 classes, "
            "see also --max-target-positions",
            fix="split or filter long sentences before fairseq-preprocess",
        )
        source = dict(limit=self.cfg.max_source_positions, option="--max-source-positions")
        check_pair_split(
            self.datasets[split],
            split=split,
            data=self.cfg.data,
            unk=self.src_dict.unk(),
            evaluation=split != self.cfg.train_subset,
            markers=("<s>", "</s>"),  # translation_lev adds <s> to both sides
            long_lines=(("target", target), ("source", source)),
        )

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
            require(
                not self.cfg.int8_decoding,
                "--int8-decoding is a decoding option (fairseq-generate, "
                "fairseq-interactive, the hub); drop it from fairseq-train",
            )
            if self.cfg.init_encoder_from:
                init_part_from_checkpoint(model, "encoder", self.cfg.init_encoder_from)
            if self.cfg.init_decoder_from:
                init_part_from_checkpoint(model, "decoder", self.cfg.init_decoder_from)
        return model

    def build_generator(self, models, args, **unused):
        for model in models:
            require(
                isinstance(model, CMLMNATransformerModel),
                f"--path: the checkpoint holds a {type(model).__name__}, but --task cmlm_hybrid "
                "decodes with mask-predict, which needs a conditional masked LM (--arch "
                "hi_cmlm_transformer* or cmlm_transformer); decode an autoregressive checkpoint "
                "with --task translation",
            )
        check_mask_predict_options(args)
        for model in models:
            for name in ("length_offset", "length_offset_ramp"):
                require(
                    hasattr(model.decoder, name) or not getattr(self.cfg, name),
                    f"{flag(name)}: the checkpoint's decoder is fairseq's CMLM decoder, which "
                    f"predicts lengths without it; give a hi_cmlm_transformer checkpoint or drop "
                    f"{flag(name)}",
                )
                if hasattr(model.decoder, name):
                    setattr(model.decoder, name, getattr(self.cfg, name))
        if self.cfg.int8_decoding:
            for model in models:
                quantize_for_decoding(model)
        length_beam = generation_option(args, "iter_decode_with_beam")
        if hasattr(
            args, "beam"
        ):  # fairseq-generate's last line, "Generate SUBSET with beam=N": not --beam's 5
            args.beam = length_beam
        return MaskPredictGenerator(
            self.target_dictionary,
            lean=len(models) == 1 and lean_mask_predict.applies(models[0]),
            max_iter=generation_option(args, "iter_decode_max_iter"),
            beam_size=length_beam,
            reranking=generation_option(args, "iter_decode_with_external_reranker"),
            decoding_format=generation_option(args, "decoding_format"),
            adaptive=not generation_option(args, "iter_decode_force_max_iter"),
            retain_history=generation_option(args, "retain_iter_history"),
            remove_repeats=self.cfg.remove_repeats,
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

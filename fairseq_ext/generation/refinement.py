"""Mask-predict with a length beam for task ``cmlm_hybrid`` (Ghazvininejad et al. 2019,
section 3): ``lean_mask_predict`` where it applies, else fairseq's ``IterativeRefinementGenerator``
with three of its bugs fixed; then, if asked, consecutive repeats are removed (``repeats``)."""

from __future__ import annotations

import copy

import torch
from fairseq.iterative_refinement_generator import IterativeRefinementGenerator

from fairseq_ext.common.errors import require
from fairseq_ext.generation import lean_mask_predict
from fairseq_ext.generation.finite_scores import refuse_non_finite
from fairseq_ext.generation.repeats import remove_consecutive_repeats
from fairseq_ext.models.decoding_call import call_option


class _RefinementModel:
    """One CMLM ``model`` as fairseq's generator calls it for one ``sample``, fixing three bugs:
    the length beam is made here (fairseq picks the best candidate with ``np.argmax`` of CUDA
    tensors and crashes, upstream issue 4063); non-finite outputs stop decoding; masked slots
    leave each pass as one of two ``markers`` (out-of-vocabulary ids), alternating, so that
    fairseq's adaptive stop (a pass that leaves a row unchanged) never ends a row with masks."""

    def __init__(self, model, sample: dict, beam: int, unk: int, markers: tuple[int, int]):
        self.model, self.encoder, self.sample = model, model.encoder, sample
        self.beam, self.unk, self.markers = beam, unk, markers
        self.encoder_out = None

    def eval(self):
        self.model.eval()

    def forward_encoder(self, inputs):
        """The encoder output of ``sample``, repeated for each length candidate."""
        net = self.sample["net_input"]
        self.encoder_out = self.model.forward_encoder([net["src_tokens"], net["src_lengths"]])
        refuse_non_finite(self.encoder_out["encoder_out"][0], self.sample, "encoder outputs")
        if self.beam == 1:
            return self.encoder_out
        rows = torch.arange(len(net["src_tokens"]), device=net["src_tokens"].device)
        return self.encoder.reorder_encoder_out(self.encoder_out, rows.repeat_interleave(self.beam))

    def initialize_output_tokens(self, encoder_out, src_tokens):
        start = self.model.initialize_output_tokens(
            self.encoder_out, self.sample["net_input"]["src_tokens"]
        )
        return start if self.beam == 1 else self.model.regenerate_length_beam(start, self.beam)

    def forward_decoder(self, decoder_out, encoder_out, **kwargs):
        tokens = decoder_out.output_tokens
        tokens = tokens.masked_fill(tokens.ge(self.markers[0]), self.unk)
        out = self.model.forward_decoder(
            decoder_out._replace(output_tokens=tokens), encoder_out, **kwargs
        )
        refuse_non_finite(out.output_scores, self.sample, "scores")
        if out.step + 1 == out.max_step:
            return out
        marker = self.markers[out.step % 2]
        return out._replace(
            output_tokens=out.output_tokens.masked_fill(out.output_tokens.eq(self.unk), marker)
        )


class MaskPredictGenerator(IterativeRefinementGenerator):
    """fairseq's generator for one CMLM model; ``lean``: decode with ``lean_mask_predict``;
    ``remove_repeats``: remove consecutive repeats of up to that many tokens from each output
    (``--remove-repeats``, 0: none; a Python API call may choose otherwise, ``decoding_call``)."""

    cpu_chunk = 16  # sentences of a CPU sub-batch of similar source lengths (_length_sorted)

    def __init__(self, tgt_dict, lean: bool = False, remove_repeats: int = 0, **kwargs):
        super().__init__(tgt_dict, **kwargs)
        self.lean = lean
        self.remove_repeats = remove_repeats
        self.projection = lean_mask_predict.VocabularyProjection()
        self.markers = (len(tgt_dict), len(tgt_dict) + 1)

    @torch.no_grad()
    def generate(self, models, sample, prefix_tokens=None, constraints=None):
        require(
            constraints is None,
            "mask-predict cannot decode with lexical constraints; drop --constraints",
        )
        require(
            not self.reranking,
            "mask-predict here has no external reranker; drop --iter-decode-with-external-reranker",
        )
        require(
            len(models) == 1,
            f"mask-predict decodes with one model, got {len(models)} "
            "(--path a:b); average checkpoints with fairseq's "
            "scripts/average_checkpoints.py instead",
        )
        model = models[0]
        if not self.retain_dropout:
            model.eval()
        src_tokens = sample["net_input"]["src_tokens"]
        if src_tokens.device.type != "cpu" or len(src_tokens) <= self.cpu_chunk:
            finalized = self._decode(model, sample)
        else:
            finalized = [None] * len(src_tokens)
            for rows, part in self._length_sorted(sample):
                for row, hypos in zip(rows, self._decode(model, part), strict=True):
                    finalized[row] = hypos
        span = call_option("remove_repeats", self.remove_repeats)
        if span:
            return [[remove_consecutive_repeats(h, span) for h in hypos] for hypos in finalized]
        return finalized

    def _length_sorted(self, sample: dict):
        """Sub-batches of ``cpu_chunk`` sentences of similar source length without the pad columns
        they do not need, with their rows in ``sample`` (a CPU pass costs the padded size)."""
        net = sample["net_input"]
        src, lengths = net["src_tokens"], net["src_lengths"]
        for idx in lengths.argsort(stable=True).split(self.cpu_chunk):
            tokens = src[idx]
            part = {
                **sample,
                "net_input": {
                    **net,
                    "src_tokens": tokens[:, tokens.ne(self.pad).any(0)],
                    "src_lengths": lengths[idx],
                },
            }
            if "id" in sample:
                part["id"] = sample["id"][idx]
            yield idx.tolist(), part

    def _decode(self, model, sample: dict) -> list:
        beam = self.beam_size  # >= 1: check_mask_predict_options
        if self.lean:
            return lean_mask_predict.decode(
                model,
                sample,
                self.max_iter,
                beam,
                self.adaptive,
                self.unk,
                self.projection,
                self.retain_history,
            )
        fairseq = copy.copy(self)
        fairseq.beam_size = 1  # the candidates are rows of their own (_RefinementModel)
        net = sample["net_input"]
        rows = {k: net[k].repeat_interleave(beam, 0) for k in ("src_tokens", "src_lengths")}
        finalized = IterativeRefinementGenerator.generate(
            fairseq,
            [_RefinementModel(model, sample, beam, self.unk, self.markers)],
            {"net_input": rows},
        )
        if beam == 1:
            return finalized
        scores = torch.stack([f[0]["score"] for f in finalized]).view(-1, beam)
        return [finalized[i * beam + b] for i, b in enumerate(scores.argmax(dim=1).tolist())]

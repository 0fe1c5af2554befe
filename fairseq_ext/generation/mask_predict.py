"""Mask-predict decoding (Ghazvininejad et al. 2019; HI-CMLM paper, section 2.2) with a
length beam, on CPU and CUDA.

It keeps the interface and output of fairseq's ``IterativeRefinementGenerator`` (so
``fairseq-generate`` prints H/D/P lines, ``--print-step`` I lines and
``--retain-iter-history`` E lines as usual) and differs in three points:

* the best length candidate is chosen with torch on the scores' own device; fairseq calls
  ``np.argmax`` on a list of CUDA tensors there and crashes with ``--iter-decode-with-beam``
  on a GPU (upstream issue 4063);
* options that mask-predict cannot honour (ensembles, an external reranker, constraints)
  are refused with a clear error instead of an ``assert``, and so are numeric options out of
  range (``decoding_options.check_mask_predict_options``: fairseq decodes
  ``--iter-decode-with-beam -2`` with one length candidate);
* adaptive termination (the default without ``--iter-decode-force-max-iter``) stops a
  hypothesis only when it equals the previous iteration's *and* holds no masked slot. fairseq
  stops on equality alone; for CMLM the compared tokens are those after re-masking, so a short
  sentence whose mask count stays the same for two iterations (e.g. 2 of 3 slots at T = 10)
  was finalized with its masks, and ``<unk>`` (CMLM's mask symbol) was printed in the
  translation. Here such a hypothesis decodes on to the next pass.

For ``hi_cmlm_transformer`` the task builds it with ``lean=True`` (``lean_mask_predict.applies``):
each batch then decodes with ``lean_mask_predict``'s loop, which gives the same hypotheses with
less work per pass; the loop below (``forward_decoder`` per pass) decodes every other model and
``--retain-iter-history``.

A non-finite encoder output or score stops decoding with one line naming the batch's
sentences (``finite_scores``).

The model does the mask and predict steps (``forward_decoder``): at iteration t (0-based)
of T = ``--iter-decode-max-iter`` + 1 decoder passes, it predicts every masked slot and
re-masks the ``L (T - t - 1) / T`` least confident tokens. fairseq counts from 0, so
``--iter-decode-max-iter 9`` means 10 decoder passes.
"""

from __future__ import annotations

import torch
from fairseq.iterative_refinement_generator import IterativeRefinementGenerator

from fairseq_ext.common.errors import FairseqExtError, require
from fairseq_ext.generation import lean_mask_predict
from fairseq_ext.generation.finite_scores import refuse_non_finite


class MaskPredictGenerator(IterativeRefinementGenerator):
    """Iterative refinement for one CMLM model, with a device-safe length beam."""

    # On the CPU, a batch of more sentences is decoded as sub-batches of this many sentences of
    # similar source length (``_length_sorted``), the hypotheses returned in the batch's order.
    cpu_chunk = 16

    def __init__(self, tgt_dict, lean: bool = False, **kwargs):
        """fairseq's arguments; ``lean``: decode with ``lean_mask_predict`` (the task sets it where
        that loop is exact, ``lean_mask_predict.applies``)."""
        super().__init__(tgt_dict, **kwargs)
        self.lean = lean
        self.projection = lean_mask_predict.VocabularyProjection()

    def _hypothesis(self, step: int, tokens: torch.Tensor, scores: torch.Tensor | None) -> dict:
        keep = tokens.ne(self.pad)
        positional = None if scores is None else scores[keep]
        return {
            "steps": step,
            "tokens": tokens[keep],
            "positional_scores": positional,
            "score": None if positional is None else positional.mean(),
            "hypo_attn": None,
            "alignment": None,
        }

    @torch.no_grad()
    def generate(self, models, sample, prefix_tokens=None, constraints=None):
        if constraints is not None:
            raise FairseqExtError(
                "mask-predict cannot decode with lexical constraints; drop --constraints"
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
            return self._decode(model, sample)
        finalized: list = [None] * len(src_tokens)
        for rows, part in self._length_sorted(sample):
            for row, hypos in zip(rows, self._decode(model, part), strict=True):
                finalized[row] = hypos
        return finalized

    def _length_sorted(self, sample: dict):
        """Sub-batches of ``cpu_chunk`` sentences of similar source length, each without the pad
        columns it does not need, with their rows in ``sample``: on the CPU a pass costs in
        proportion to the batch's padded size (sources and predicted targets alike)."""
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
        """Mask-predict on one batch (the module docstring)."""
        if self.lean:
            return lean_mask_predict.decode(
                model,
                sample,
                self.max_iter,
                self.beam_size,
                self.adaptive,
                self.unk,
                self.projection,
            )
        src_tokens = sample["net_input"]["src_tokens"]
        src_lengths = sample["net_input"]["src_lengths"]
        bsz = src_tokens.size(0)
        beam = self.beam_size  # >= 1: check_mask_predict_options

        encoder_out = model.forward_encoder([src_tokens, src_lengths])
        refuse_non_finite(encoder_out["encoder_out"][0], sample, "encoder outputs")
        decoder_out = model.initialize_output_tokens(encoder_out, src_tokens)
        # the cross-attention keys and values, once per sentence for all its length candidates
        cache = getattr(model, "cross_attention_cache", None)
        kv = None if cache is None else cache(encoder_out)
        if beam > 1:
            order = torch.arange(bsz, device=src_tokens.device).repeat_interleave(beam)
            encoder_out = model.encoder.reorder_encoder_out(encoder_out, order)
            decoder_out = model.regenerate_length_beam(decoder_out, beam)
        n = bsz * beam

        if self.retain_history:
            decoder_out = decoder_out._replace(history=[decoder_out.output_tokens.clone()])
        finalized: list[list[dict] | None] = [None] * n
        alive = torch.arange(n, device=src_tokens.device)
        prev_tokens = decoder_out.output_tokens.clone()

        for step in range(self.max_iter + 1):
            decoder_out = decoder_out._replace(step=step, max_step=self.max_iter + 1)
            decoder_out = model.forward_decoder(
                decoder_out,
                encoder_out,
                eos_penalty=self.eos_penalty,
                max_ratio=self.max_ratio,
                decoding_format=self.decoding_format,
                **({} if kv is None else {"cross_attention_cache": kv}),
            )
            tokens, scores = decoder_out.output_tokens, decoder_out.output_scores
            refuse_non_finite(scores, sample, "scores")
            if step == self.max_iter:
                done = torch.ones_like(alive, dtype=torch.bool)
            elif self.adaptive:
                done = (tokens == prev_tokens).all(dim=1) & tokens.ne(self.unk).all(dim=1)
            else:
                done = torch.zeros_like(alive, dtype=torch.bool)

            for row in done.nonzero(as_tuple=False).view(-1).tolist():
                hypo = self._hypothesis(step, tokens[row], scores[row])
                if self.retain_history:
                    hypo["history"] = [
                        self._hypothesis(step, h[row], None) for h in decoder_out.history
                    ]
                finalized[alive[row].item()] = [hypo]

            if bool(done.all()):
                break
            if bool(done.any()):  # drop the finished rows (no copy while all decode on)
                keep = ~done
                decoder_out = decoder_out._replace(
                    output_tokens=tokens[keep],
                    output_scores=scores[keep],
                    attn=None,
                    history=None
                    if decoder_out.history is None
                    else [h[keep] for h in decoder_out.history],
                )
                encoder_out = model.encoder.reorder_encoder_out(
                    encoder_out, keep.nonzero(as_tuple=False).view(-1)
                )
                kv = None if cache is None else cache(encoder_out)
                alive = alive[keep]
            prev_tokens = decoder_out.output_tokens.clone()

        if beam > 1:
            # Length beam: keep, per sentence, the candidate with the best mean log-probability.
            best_scores = torch.stack([f[0]["score"] for f in finalized]).view(bsz, beam)
            best = best_scores.argmax(dim=1).tolist()
            finalized = [finalized[i * beam + b] for i, b in enumerate(best)]
        return finalized

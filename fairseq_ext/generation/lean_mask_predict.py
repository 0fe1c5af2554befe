"""Mask-predict (Ghazvininejad et al. 2019, section 3) for ``hi_cmlm_transformer`` (Wang et
al. 2021), as fairseq's ``IterativeRefinementGenerator`` decodes it, with what does not change
between passes (encoder, length candidates, padding, positions, the soft copy Z of eq. 8-10, the
cross-attention keys and values) computed once per batch; the state is the call's own."""

from __future__ import annotations

import torch
from fairseq.models.nat.cmlm_transformer import _skeptical_unmasking

from fairseq_ext.common.errors import note
from fairseq_ext.generation.finite_scores import refuse_non_finite
from fairseq_ext.masking import mix_decoder_input
from fairseq_ext.models.decoding_call import call_option, in_call
from fairseq_ext.modules.cross_attention_cache import cross_attention_cache


def applies(model) -> bool:
    """Whether this loop decodes ``model`` exactly: a ``hi_cmlm_transformer`` whose decoder
    layers attend to the encoder with their own keys (no ``--cross-self-attention``)."""
    from fairseq_ext.models.hi_cmlm_transformer import HiCMLMTransformerModel

    if not isinstance(model, HiCMLMTransformerModel):
        return False
    layers = model.decoder.layers
    return all(
        layer.encoder_attn is not None and not layer.cross_self_attention for layer in layers
    )


class _Slots:
    """The state of the rows (length candidates) still decoding, and what stays fixed for them."""

    def __init__(self, model, encoder_out: dict, src_tokens: torch.Tensor, beam: int):
        decoder, device = model.decoder, src_tokens.device
        start = model.initialize_output_tokens(encoder_out, src_tokens)
        if beam > 1:
            start = model.regenerate_length_beam(start, beam)
        self.tokens, self.scores = start.output_tokens, start.output_scores
        self.sentence = torch.arange(src_tokens.size(0), device=device).repeat_interleave(beam)
        self.row = torch.arange(self.tokens.size(0), device=device)  # index in the flattened batch
        self.padding = self.tokens.eq(decoder.padding_idx)
        self.non_pad = ~self.padding
        self.positions = (
            None if decoder.embed_positions is None else decoder.embed_positions(self.tokens)
        )
        self.copy = None
        if decoder.copies_source():
            src_embedding = encoder_out["encoder_embedding"][0]
            masks = encoder_out["encoder_padding_mask"]
            src_mask = ~masks[0] if masks else src_tokens.new_ones(*src_embedding.shape[:2]).bool()
            if beam > 1:
                src_embedding, src_mask = src_embedding[self.sentence], src_mask[self.sentence]
            self.copy = decoder.forward_copying_source(src_embedding, src_mask, self.non_pad)
        self.kv = cross_attention_cache(decoder.layers, encoder_out)
        self.kv_per_row = beam == 1
        self.history: list[torch.Tensor] | None = None  # each state's tokens, when kept

    def keep(self, rows: torch.Tensor) -> None:
        """Only ``rows`` (indices into the current rows) decode on."""
        for name in (
            "tokens",
            "scores",
            "sentence",
            "row",
            "padding",
            "non_pad",
            "positions",
            "copy",
        ):
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, value[rows])
        if self.history is not None:
            self.history = [h[rows] for h in self.history]
        # the cached keys and values, per sentence while every sentence has all its candidates
        index = rows if self.kv_per_row else self.sentence
        for buffer in self.kv.values():
            for key in ("prev_key", "prev_value", "prev_key_padding_mask"):
                # contiguous: fairseq views (B, heads) as one dimension
                if buffer.get(key) is not None:
                    buffer[key] = buffer[key][index].contiguous()
        self.kv_per_row = True


def fairseq_extract_features(
    decoder, tokens, encoder_out, padding, positions, copy, kv
) -> torch.Tensor:
    """A copy of fairseq's ``NATransformerDecoder.extract_features`` (``forward_embedding`` with
    ``HybridInputDecoder``'s mix of Z, and ``TransformerDecoderLayer.forward``, inlined) whose
    cross-attention reads the cached ``kv``; ``tests/test_lean_mask_predict.py`` pins it."""
    x = decoder.embed_scale * decoder.embed_tokens(tokens)
    if decoder.project_in_dim is not None:
        x = decoder.project_in_dim(x)
    if copy is not None:
        x = mix_decoder_input(x, copy.to(x.dtype), decoder.copy_weight(tokens))
    if positions is not None:
        x += positions
    x = decoder.dropout_module(x).transpose(0, 1)
    enc = encoder_out["encoder_out"][0]
    masks = encoder_out["encoder_padding_mask"]
    enc_mask = masks[0] if masks else None
    for layer in decoder.layers:
        residual = x
        if layer.normalize_before:
            x = layer.self_attn_layer_norm(x)
        x, _ = layer.self_attn(x, x, x, key_padding_mask=padding, need_weights=False)
        if layer.c_attn is not None:
            tgt_len, bsz = x.size(0), x.size(1)
            x = x.view(tgt_len, bsz, layer.nh, layer.head_dim)
            x = torch.einsum("tbhd,h->tbhd", x, layer.c_attn)
            x = x.reshape(tgt_len, bsz, layer.embed_dim)
        if layer.attn_ln is not None:
            x = layer.attn_ln(x)
        x = layer.residual_connection(layer.dropout_module(x), residual)
        if not layer.normalize_before:
            x = layer.self_attn_layer_norm(x)
        residual = x
        if layer.normalize_before:
            x = layer.encoder_attn_layer_norm(x)
        x, _ = layer.encoder_attn(x, enc, enc, enc_mask, kv, need_weights=False, static_kv=True)
        x = layer.residual_connection(layer.dropout_module(x), residual)
        if not layer.normalize_before:
            x = layer.encoder_attn_layer_norm(x)
        residual = x
        if layer.normalize_before:
            x = layer.final_layer_norm(x)
        x = layer.activation_dropout_module(layer.activation_fn(layer.fc1(x)))
        if layer.ffn_layernorm is not None:
            x = layer.ffn_layernorm(x)
        x = layer.dropout_module(layer.fc2(x))
        if layer.w_resid is not None:
            residual = torch.mul(layer.w_resid, residual)
        x = layer.residual_connection(x, residual)
        if not layer.normalize_before:
            x = layer.final_layer_norm(x)
    if decoder.layer_norm is not None:
        x = decoder.layer_norm(x)
    x = x.transpose(0, 1)
    if decoder.project_out_dim is not None:
        x = decoder.project_out_dim(x)
    return x


class VocabularyProjection:
    """The output projection of the masked slots: for at most ``few_rows`` rows on the CPU, the
    product with a cached transpose of the weight (faster there); else ``output_layer``."""

    few_rows = 32

    def __init__(self):
        self._cache = (None, None)  # (key, transposed weight), replaced in one assignment

    def __call__(self, decoder, features: torch.Tensor) -> torch.Tensor:
        proj = getattr(decoder, "output_projection", None)
        plain = (
            type(proj) is torch.nn.Linear
            and proj.bias is None
            and decoder.adaptive_softmax is None
            and features.device.type == "cpu"
        )
        if not plain or features.size(0) > self.few_rows:
            return decoder.output_layer(features)
        w = proj.weight
        key = (w.data_ptr(), w._version, w.dtype)
        cached, weight_t = self._cache
        if key != cached:
            weight_t = w.detach().t().contiguous()
            self._cache = (key, weight_t)
        return features @ weight_t


def _hypothesis(
    step: int,
    tokens: torch.Tensor,
    scores: torch.Tensor,
    keep: torch.Tensor,
    history: list[torch.Tensor] | None = None,
) -> dict:
    """fairseq's hypothesis of one row, with its ``history`` (its tokens in each kept state)."""
    positional = scores[keep]
    hypo = {
        "steps": step,
        "tokens": tokens[keep],
        "positional_scores": positional,
        "score": positional.mean(),
        "hypo_attn": None,
        "alignment": None,
    }
    if history is not None:
        empty = dict.fromkeys(("positional_scores", "score", "hypo_attn", "alignment"))
        hypo["history"] = [{"steps": step, "tokens": h[keep], **empty} for h in history]
    return hypo


def _outside_inference_mode(hypo: dict) -> dict:
    """``hypo`` with tensors that accept fairseq-interactive's in-place division."""
    out = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in hypo.items()}
    if "history" in out:
        out["history"] = [_outside_inference_mode(h) for h in out["history"]]
    return out


def note_emptied(finalized: list[dict], offset: int) -> None:
    """One line on stderr (``fairseq-generate``, ``fairseq-interactive``) when a negative length
    offset left translations of this batch empty (``<s> </s>``, fairseq's shortest length); the
    Python API warns once per call instead (``hub.generation``)."""
    empty = sum(len(hypo["tokens"]) <= 2 for hypo in finalized)
    if offset < 0 and empty and not in_call():
        note(
            f"--length-offset {offset} left {empty} of {len(finalized)} translations of a batch "
            f"empty (every predicted length is cut by {-offset} tokens); an offset closer to 0 "
            "keeps them (0 decodes as the model was trained)"
        )


def predict_masked(slots, decoder, encoder_out: dict, projection, unk: int) -> None:
    """One pass's prediction: the masked slots of ``slots`` take their most probable token and
    its log-probability, in place (Ghazvininejad et al. 2019, section 3.1)."""
    masks = slots.tokens.eq(unk)
    features = fairseq_extract_features(
        decoder, slots.tokens, encoder_out, slots.padding, slots.positions, slots.copy, slots.kv
    )
    logits = projection(decoder, features[masks])
    best, index = logits.max(-1)
    slots.tokens.masked_scatter_(masks, index)
    slots.scores.masked_scatter_(masks, best - logits.logsumexp(-1))


def remask(slots, step: int, passes: int, unk: int) -> None:
    """Mask again the lowest-scoring tokens after pass ``step`` of ``passes`` (fairseq's
    ``_skeptical_unmasking``: a linearly decaying share), in place."""
    masked = _skeptical_unmasking(slots.scores, slots.non_pad, 1 - (step + 1) / passes)
    slots.tokens.masked_fill_(masked, unk)
    slots.scores.masked_fill_(masked, 0.0)


def decode(
    model,
    sample: dict,
    max_iter: int,
    beam: int,
    adaptive: bool,
    unk: int,
    projection: VocabularyProjection,
    history: bool = False,
) -> list[list[dict]]:
    """The best hypothesis of each sentence after ``max_iter + 1`` passes (fewer for a row that
    ``adaptive`` stops: unchanged and no mask left), as fairseq's generator gives it; ``history``:
    with fairseq's ``--retain-iter-history`` entries."""
    src_tokens, src_lengths = sample["net_input"]["src_tokens"], sample["net_input"]["src_lengths"]
    bsz, passes = src_tokens.size(0), max_iter + 1
    decoder = model.decoder
    with torch.inference_mode():
        encoder_out = model.forward_encoder([src_tokens, src_lengths])
        refuse_non_finite(encoder_out["encoder_out"][0], sample, "encoder outputs")
        slots = _Slots(model, encoder_out, src_tokens, beam)
        if history:
            slots.history = [slots.tokens.clone()]
        finalized: list[dict | None] = [None] * (bsz * beam)

        def finalize(rows: list[int], step: int) -> None:
            for i, row in zip(rows, slots.row[rows].tolist()):
                kept = None if slots.history is None else [h[i] for h in slots.history]
                finalized[row] = _hypothesis(
                    step, slots.tokens[i], slots.scores[i], slots.non_pad[i], kept
                )

        for step in range(passes):
            tokens, scores = slots.tokens, slots.scores
            previous = tokens.clone() if adaptive and step < max_iter else None
            predict_masked(slots, decoder, encoder_out, projection, unk)
            refuse_non_finite(scores, sample, "scores")
            if slots.history is not None:
                slots.history.append(tokens.clone())
            if step == max_iter:
                finalize(list(range(tokens.size(0))), step)
                break
            remask(slots, step, passes, unk)
            if slots.history is not None:
                slots.history.append(tokens.clone())
            if previous is not None:
                done = (tokens == previous).all(dim=1) & tokens.ne(unk).all(dim=1)
                if bool(done.any()):
                    finalize(done.nonzero(as_tuple=False).view(-1).tolist(), step)
                    if bool(done.all()):
                        break
                    slots.keep((~done).nonzero(as_tuple=False).view(-1))
        if beam > 1:
            best = torch.stack([f["score"] for f in finalized]).view(bsz, beam).argmax(1).tolist()
            finalized = [finalized[i * beam + b] for i, b in enumerate(best)]
    note_emptied(finalized, call_option("length_offset", decoder.length_offset))
    return [[_outside_inference_mode(hypo)] for hypo in finalized]

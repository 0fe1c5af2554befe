"""A lean mask-predict loop (Ghazvininejad et al. 2019, section 3) for ``hi_cmlm_transformer``:
the passes of ``MaskPredictGenerator``'s generic loop over ``forward_decoder``, with what does
not change from one pass to the next computed once per batch.

Once per batch: the encoder; the target slots (the length beam flattened into the batch); the
decoder's padding mask and positional embeddings; the soft copy of the source embeddings Z
(eq. 8-10: it depends on the source and on the target length, not on which slots are masked);
the cross-attention keys and values of every decoder layer (``modules.cross_attention_cache``,
computed for the sentences and shared by their length candidates). Per pass: the token
embeddings mixed with Z by the strategy's rule and the decoder layers
(``fairseq_extract_features``, a copy of fairseq's that reads those keys and values), the
vocabulary projection at the masked slots (``VocabularyProjection``) and fairseq's re-masking
(``_skeptical_unmasking``), on the same tensors, updated in place, under
``torch.inference_mode``. No ``DecoderOut`` per pass, no history, and the encoder output is never
reordered: under adaptive termination the finished rows leave the precomputed tensors by one
index each.

Everything a decoding changes is its own (the keys and values, the slots), handed from call to
call and never set on the model: threads that share one model decode apart. The strategy and the
length offset are the model's, or those of the Python API call under way in the thread
(``decoding_options.decoding_call``).

Every op that runs is the generic loop's, in the same order, but the vocabulary product at few
rows; the hypotheses are the same, the scores within float rounding
(``tests/test_lean_mask_predict.py``). ``applies`` says where that holds, and ``cmlm_hybrid``
decodes with this loop there; ``--retain-iter-history``, another model class or a decoder
layer of a kind it does not know decode with the generic loop.
"""

from __future__ import annotations

import torch
from fairseq.models.nat.cmlm_transformer import _skeptical_unmasking

from fairseq_ext.common.errors import note
from fairseq_ext.generation.decoding_options import call_length_offset, in_call
from fairseq_ext.generation.finite_scores import refuse_non_finite
from fairseq_ext.masking import mix_decoder_input
from fairseq_ext.modules.cross_attention_cache import cross_attention_cache


def applies(model, retain_history: bool) -> bool:
    """Whether the lean loop decodes ``model`` exactly as the generic one: a
    ``hi_cmlm_transformer`` (its ``HybridInputDecoder``), no iteration history, and decoder
    layers that attend to the encoder with their own keys (fairseq's post- or pre-norm layer, no
    ``--cross-self-attention``)."""
    from fairseq_ext.models.hi_cmlm_transformer import HiCMLMTransformerModel

    if not isinstance(model, HiCMLMTransformerModel) or retain_history:
        return False
    layers = model.decoder.layers
    return all(
        layer.encoder_attn is not None and not layer.cross_self_attention for layer in layers
    )


class _Slots:
    """The decoding state of the rows (length candidates) still decoding, and what stays fixed
    for them across passes."""

    def __init__(self, model, encoder_out: dict, src_tokens: torch.Tensor, beam: int):
        decoder = model.decoder
        start = model.initialize_output_tokens(encoder_out, src_tokens)
        if beam > 1:
            start = model.regenerate_length_beam(start, beam)
        self.tokens, self.scores = start.output_tokens, start.output_scores
        n = self.tokens.size(0)
        self.sentence = torch.arange(
            src_tokens.size(0), device=src_tokens.device
        ).repeat_interleave(beam)
        self.row = torch.arange(
            n, device=src_tokens.device
        )  # this row's index in the flattened batch
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
        # the cached keys and values, per sentence while every sentence has all its candidates
        index = rows if self.kv_per_row else self.sentence
        for buffer in self.kv.values():
            for key in ("prev_key", "prev_value", "prev_key_padding_mask"):
                if (
                    buffer.get(key) is not None
                ):  # contiguous: fairseq views (B, heads) as one dimension
                    buffer[key] = buffer[key][index].contiguous()
        self.kv_per_row = True


def fairseq_extract_features(
    decoder, tokens, encoder_out, padding, positions, copy, kv
) -> torch.Tensor:
    """A copy of fairseq's ``NATransformerDecoder.extract_features`` (with its
    ``forward_embedding``, ``HybridInputDecoder.forward_embedding``'s mix of Z and each
    ``TransformerDecoderLayer.forward`` inlined) for decoder layers with encoder attention and no
    cross-self-attention (``applies``), whose cross-attention reads its keys and values from
    ``kv`` (``cross_attention_cache``) instead of projecting the encoder output again.

    ``padding``, ``positions`` (None: no positional embedding) and ``copy`` (Z, None where the
    strategy gives no slot Z) are the slots' own, computed once per batch; the keys and values
    are handed to each call, never set on the shared layers, so concurrent decodes of one model
    stay apart. ``tests/test_lean_mask_predict.py`` compares it with fairseq's own."""
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
        x, _ = layer.self_attn(
            query=x,
            key=x,
            value=x,
            key_padding_mask=padding,
            incremental_state=None,
            need_weights=False,
            attn_mask=None,
        )
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
        x, _ = layer.encoder_attn(
            query=x,
            key=enc,
            value=enc,
            key_padding_mask=enc_mask,
            incremental_state=kv,
            static_kv=True,
            need_weights=False,
        )
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
    """The decoder's output projection of the masked slots' features. For a few rows (batch 1),
    the product with a contiguous copy of the transposed weight (kept while the weight is
    unchanged), which the CPU's matrix product runs up to twice as fast as ``nn.Linear``'s
    product with the transposed view, to within float rounding; otherwise the decoder's own
    ``output_layer`` (an int8 or adaptive one included)."""

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


def _hypothesis(step: int, tokens: torch.Tensor, scores: torch.Tensor, keep: torch.Tensor) -> dict:
    positional = scores[keep]
    return {
        "steps": step,
        "tokens": tokens[keep],
        "positional_scores": positional,
        "score": positional.mean(),
        "hypo_attn": None,
        "alignment": None,
    }


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


def decode(
    model,
    sample: dict,
    max_iter: int,
    beam: int,
    adaptive: bool,
    unk: int,
    projection: VocabularyProjection,
) -> list[list[dict]]:
    """The best hypothesis of each sentence of ``sample`` after ``max_iter + 1`` passes (fewer
    for a row that ``adaptive`` termination stops: unchanged by a pass and no mask left), as
    ``MaskPredictGenerator._decode`` gives it."""
    src_tokens, src_lengths = sample["net_input"]["src_tokens"], sample["net_input"]["src_lengths"]
    bsz, passes = src_tokens.size(0), max_iter + 1
    decoder = model.decoder
    with torch.inference_mode():
        encoder_out = model.forward_encoder([src_tokens, src_lengths])
        refuse_non_finite(encoder_out["encoder_out"][0], sample, "encoder outputs")
        slots = _Slots(model, encoder_out, src_tokens, beam)
        finalized: list[dict | None] = [None] * (bsz * beam)
        for step in range(passes):
            tokens, scores = slots.tokens, slots.scores
            previous = tokens.clone() if adaptive and step < max_iter else None
            masks = tokens.eq(unk)
            features = fairseq_extract_features(
                decoder,
                tokens,
                encoder_out,
                slots.padding,
                slots.positions,
                slots.copy,
                slots.kv,
            )
            logits = projection(decoder, features[masks])
            best, index = logits.max(-1)
            tokens.masked_scatter_(masks, index)
            scores.masked_scatter_(masks, best - logits.logsumexp(-1))
            refuse_non_finite(scores, sample, "scores")
            if step == max_iter:
                for row, t, s, k in zip(slots.row.tolist(), tokens, scores, slots.non_pad):
                    finalized[row] = _hypothesis(step, t, s, k)
                break
            remask = _skeptical_unmasking(scores, slots.non_pad, 1 - (step + 1) / passes)
            tokens.masked_fill_(remask, unk)
            scores.masked_fill_(remask, 0.0)
            if previous is not None:
                done = (tokens == previous).all(dim=1) & tokens.ne(unk).all(dim=1)
                if bool(done.any()):
                    for i in done.nonzero(as_tuple=False).view(-1).tolist():
                        finalized[slots.row[i].item()] = _hypothesis(
                            step, tokens[i], scores[i], slots.non_pad[i]
                        )
                    if bool(done.all()):
                        break
                    slots.keep((~done).nonzero(as_tuple=False).view(-1))
        if beam > 1:
            best = (
                torch.stack([f["score"] for f in finalized]).view(bsz, beam).argmax(dim=1).tolist()
            )
            finalized = [finalized[i * beam + b] for i, b in enumerate(best)]
    note_emptied(finalized, call_length_offset(decoder.length_offset))
    # tensors made in inference mode accept no in-place update after it (fairseq-interactive
    # divides the positional scores in place): hand out copies made outside it
    return [
        [{k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in hypo.items()}]
        for hypo in finalized
    ]

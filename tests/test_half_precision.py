"""Half precision on CPU (no GPU here, so no --fp16/--bf16 training runs): every helper that
turns a mask into large negative scores, and every model family's forward pass, in float16
and bfloat16 against float32/float64 references.

Covered elsewhere already: ``soft_copy`` finite in fp16/bf16 (test_masking_hicmlm), the
n-stream key mask and ``NgramSelfAttention`` (test_masking_prophetnet), ``MaskedTransformerLayer``
and the whole ``unilm_transformer`` (test_unilm_model). Added here: the additive mask of every
attention-mask builder with an exact reference softmax, ``soft_copy`` against float32, and the
forward passes of ``hi_cmlm_transformer`` (soft copy into the decoder input), ``prophetnet``
(all streams, and incremental decoding with its per-step masks) and
``position_masked_roberta`` (the mask-position embedding and position classifier)."""

import pytest
import torch

from fairseq_ext.masking import additive_attention_mask, random_order, soft_copy
from fairseq_ext.masking.attention import (
    bidirectional_mask,
    causal_mask,
    permutation_mask,
    prefix_lm_mask,
)
from fairseq_ext.masking.corruption import MASK_POSITION
from fairseq_ext.masking.ngram_stream import ngram_stream_key_mask
from tests.helpers.families import build, dict_folder

HALF = [torch.float16, torch.bfloat16]


def _padding():
    pad = torch.zeros(3, 7, dtype=torch.bool)
    pad[0, 5:] = True
    pad[2, 6:] = True
    return pad


def _masks() -> dict:
    pad = _padding()
    segments = torch.tensor([[0, 0, 0, 1, 1, 1, 1]] * 3)
    order = random_order(pad, generator=torch.Generator().manual_seed(0))
    return {
        "bidirectional": bidirectional_mask(pad),
        "causal": causal_mask(pad),
        "prefix": prefix_lm_mask(segments, pad),
        "permutation": permutation_mask(order, pad),
        "ngram": ngram_stream_key_mask(5, 2),
    }


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("name", ["bidirectional", "causal", "prefix", "permutation", "ngram"])
def test_additive_mask_of_every_builder_gives_the_exact_softmax(dtype, name):
    allowed = _masks()[name]
    add = additive_attention_mask(allowed, dtype)
    assert add.dtype == dtype and torch.isfinite(add).all()
    # large scores of both signs, in the half dtype, as attention computes them
    scores = (torch.randn(allowed.shape, generator=torch.Generator().manual_seed(1)) * 40).to(dtype)
    probs = torch.softmax((scores + add).float(), dim=-1)
    # reference: softmax over the allowed keys only, one row at a time, in float64
    want = torch.zeros(allowed.shape, dtype=torch.float64)
    flat_allowed, flat_scores, flat_want = (
        allowed.reshape(-1, allowed.size(-1)),
        scores.double().reshape(-1, allowed.size(-1)),
        want.view(-1, allowed.size(-1)),
    )
    for r in range(flat_allowed.size(0)):
        keys = flat_allowed[r]
        assert keys.any()  # every builder leaves each query a key
        flat_want[r, keys] = torch.softmax(flat_scores[r, keys], dim=0)
    assert torch.isfinite(probs).all()
    assert torch.equal(probs[~allowed], torch.zeros_like(probs[~allowed]))
    assert torch.allclose(probs.double(), want, atol=1e-6)


@pytest.mark.parametrize("dtype", HALF)
def test_soft_copy_in_half_precision_matches_float32(dtype):
    g = torch.Generator().manual_seed(2)
    src_mask = torch.tensor([[True] * 6, [True] * 3 + [False] * 3])
    tgt_mask = torch.tensor([[True] * 4, [True] * 2 + [False] * 2])
    emb = torch.randn(2, 6, 16, generator=g) * 8
    want = soft_copy(emb, src_mask, tgt_mask, 0.2)
    got = soft_copy(emb.to(dtype), src_mask, tgt_mask, 0.2)
    assert got.dtype == dtype and torch.isfinite(got).all()
    assert torch.allclose(got.float(), want, atol=0.02 * float(want.abs().max()))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return dict_folder(tmp_path_factory.mktemp("dicts"), 30)


def _close(got, want, dtype, what):
    assert got.dtype == dtype, what
    assert torch.isfinite(got).all(), what
    scale = float(want.abs().max())
    tolerance = 0.005 if dtype == torch.float16 else 0.03  # of the largest logit
    assert float((got.float() - want).abs().max()) <= tolerance * scale, what


def _pairs(vocab=30, bsz=3, src_len=9, tgt_len=7, nspecial=4):
    g = torch.Generator().manual_seed(3)
    src = torch.randint(nspecial, nspecial + vocab, (bsz, src_len), generator=g)
    src[:, -1] = 2
    src[1, :3] = 1  # left padding, as fairseq batches sources
    tgt = torch.randint(nspecial, nspecial + vocab, (bsz, tgt_len), generator=g)
    return src, src.ne(1).sum(1), tgt


@pytest.mark.parametrize("dtype", HALF)
def test_hi_cmlm_forward_with_soft_copy_in_half_precision(folder, dtype):
    _, model, _ = build(folder, "hi_cmlm", "--hybrid-strategy", "fence_replace", "--dropout", "0")
    model.eval()
    src, lengths, tgt = _pairs()
    tgt[:, 0], tgt[:, -1] = 0, 2  # <s> ... </s>
    prev = tgt.clone()
    prev[:, 1:-1:2] = 3  # masked (<unk>) slots get the hybrid input
    with torch.no_grad():  # the same random subset of masked slots gets Z in both (section 3.3)
        torch.manual_seed(0)
        want = model(src, lengths, prev, tgt)
        torch.manual_seed(0)
        got = model.to(dtype)(src, lengths, prev, tgt)
    _close(got["word_ins"]["out"], want["word_ins"]["out"], dtype, "word_ins")


@pytest.mark.parametrize("dtype", HALF)
def test_prophetnet_streams_and_incremental_decoding_in_half_precision(folder, dtype):
    _, model, _ = build(
        folder,
        "prophetnet",
        "--dropout",
        "0",
        "--attention-dropout",
        "0",
        "--activation-dropout",
        "0",
    )
    model.eval()
    src, lengths, prev = _pairs()
    prev[:, 0] = 2

    def steps(m):
        encoder_out = m.encoder(src, src_lengths=lengths)
        state, out = {}, []
        for t in range(prev.size(1)):
            out.append(
                m.decoder(prev[:, : t + 1], encoder_out=encoder_out, incremental_state=state)[0]
            )
        return torch.cat(out, 1)

    with torch.no_grad():
        want_streams = model(src, lengths, prev)[1]["stream_logits"]
        want_steps = steps(model)
        model.to(dtype)
        got_streams = model(src, lengths, prev)[1]["stream_logits"]
        got_steps = steps(model)
    for k, (got, want) in enumerate(zip(got_streams, want_streams)):
        _close(got, want, dtype, f"stream {k + 1}")
    _close(got_steps, want_steps, dtype, "incremental")
    assert torch.allclose(
        want_steps, want_streams[0], atol=1e-4
    )  # the float32 reference is consistent


@pytest.mark.parametrize("dtype", HALF)
def test_position_masked_roberta_in_half_precision(folder, dtype):
    _, model, _ = build(folder, "posmask", "--dropout", "0", "--attention-dropout", "0")
    model.eval()
    tokens, _, _ = _pairs(src_len=12)
    tokens[:, 0], tokens[1, :3] = 0, 1
    tokens[1] = torch.cat([tokens[1, 3:], tokens[1, :3]])  # right padding, as masked_lm batches
    positions = torch.arange(12).expand(3, 12).clone()
    positions[:, 4] = MASK_POSITION
    positions[0, 6] = 2
    chosen = torch.zeros(3, 12, dtype=torch.bool)
    chosen[:, 4] = chosen[0, 6] = True
    with torch.no_grad():
        want, want_extra = model(tokens, src_positions=positions, masked_positions=chosen)
        got, got_extra = model.to(dtype)(tokens, src_positions=positions, masked_positions=chosen)
    real = tokens.ne(1)
    _close(got[real], want[real], dtype, "lm")
    _close(got_extra["position_logits"], want_extra["position_logits"], dtype, "positions")

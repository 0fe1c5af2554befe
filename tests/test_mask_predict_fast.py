"""Mask-predict's faster pass (``HiCMLMTransformerModel.forward_decoder``: the vocabulary
projection at masked slots only, ``max - logsumexp`` scores, the cross-attention keys and values
computed once per sentence and shared by its length candidates) decodes the shipped student to
the same hypotheses as fairseq's own CMLM pass (``CMLMNATransformerModel.forward_decoder``,
which projects every slot and normalises over the vocabulary): the same tokens and steps, scores
within 1e-5, at batch 1 and on a padded batch, with length beam 1 and 3, with and without
``--iter-decode-force-max-iter``."""

from __future__ import annotations

from argparse import Namespace

import pytest
import torch

from tests.conftest import ROOT, fairseq_pass, load_shipped_student, read_sample

MODEL = ROOT / "examples" / "quickstart" / "model"


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    import sentencepiece as spm

    model, task = load_shipped_student(tmp_path_factory.mktemp("dicts"))
    sp = spm.SentencePieceProcessor(model_file=str(MODEL / "spm.model"))
    sd = task.src_dict
    sources = [
        torch.tensor([sd.index(p) for p in sp.encode(line, out_type=str)] + [sd.eos()])
        for line in read_sample("test", "en", 12)
    ]
    return model, task, sources


def batch(sources: list[torch.Tensor], pad: int) -> dict:
    """fairseq's left-padded source batch."""
    S = max(len(s) for s in sources)
    src = torch.full((len(sources), S), pad)
    for i, s in enumerate(sources):
        src[i, S - len(s) :] = s
    return {
        "id": torch.arange(len(sources)),
        "net_input": {"src_tokens": src, "src_lengths": torch.tensor([len(s) for s in sources])},
    }


def decode(model, task, sample, passes: int, beam: int, force: bool) -> list[dict]:
    """The generic loop's hypotheses (over ``forward_decoder``; the lean loop calls no such pass)."""
    gen = task.build_generator(
        [model],
        Namespace(
            iter_decode_max_iter=passes - 1,
            iter_decode_with_beam=beam,
            iter_decode_force_max_iter=force,
        ),
    )
    gen.lean = False
    return [h[0] for h in gen.generate([model], sample)]


@pytest.mark.parametrize("bsz", [1, 12])
@pytest.mark.parametrize("beam", [1, 3])
@pytest.mark.parametrize("passes,force", [(4, True), (10, True), (10, False)])
def test_fast_pass_decodes_as_fairseq(student, bsz, beam, passes, force):
    model, task, sources = student
    for first in range(0, len(sources) if bsz == 1 else 1, 4 if bsz == 1 else 1):
        sample = batch(sources[first : first + bsz], task.src_dict.pad())
        with torch.no_grad():
            fast = decode(model, task, sample, passes, beam, force)
            with fairseq_pass(model):
                ref = decode(model, task, sample, passes, beam, force)
        for f, r in zip(fast, ref, strict=True):
            assert torch.equal(f["tokens"], r["tokens"])
            assert f["steps"] == r["steps"]
            torch.testing.assert_close(
                f["positional_scores"], r["positional_scores"], rtol=0, atol=1e-5
            )
            torch.testing.assert_close(f["score"], r["score"], rtol=0, atol=1e-5)


def test_the_cache_is_shared_by_the_length_candidates(student):
    """The keys and values are computed for the sentences (not per candidate)."""
    model, task, sources = student
    sample = batch(sources[:5], task.src_dict.pad())
    with torch.no_grad():
        encoder_out = model.forward_encoder(
            [sample["net_input"]["src_tokens"], sample["net_input"]["src_lengths"]]
        )
        state = model.cross_attention_cache(encoder_out)
    buffers = [layer.encoder_attn._get_input_buffer(state) for layer in model.decoder.layers]
    heads = model.decoder.layers[0].encoder_attn.num_heads
    assert all(
        b["prev_key"].shape[:2] == (5, heads) and b["prev_value"].shape[:2] == (5, heads)
        for b in buffers
    )


@pytest.mark.parametrize("beam,force", [(1, True), (3, True), (3, False)])
def test_length_sorted_sub_batches_decode_as_the_whole_batch(student, beam, force):
    """On the CPU a batch of more than ``cpu_chunk`` sentences is decoded as length-sorted
    sub-batches; the hypotheses are those of the whole batch, in its order."""
    model, task, sources = student
    sample = batch(sources, task.src_dict.pad())
    gen = task.build_generator(
        [model],
        Namespace(
            iter_decode_max_iter=9, iter_decode_with_beam=beam, iter_decode_force_max_iter=force
        ),
    )
    with torch.no_grad():
        gen.cpu_chunk = 5
        parts = [h[0] for h in gen.generate([model], sample)]
        gen.cpu_chunk = len(sources)
        whole = [h[0] for h in gen.generate([model], sample)]
    assert sorted(range(len(sources)), key=lambda i: len(sources[i])) != list(range(len(sources)))
    for p, w in zip(parts, whole, strict=True):
        assert torch.equal(p["tokens"], w["tokens"])
        assert p["steps"] == w["steps"]
        torch.testing.assert_close(
            p["positional_scores"], w["positional_scores"], rtol=0, atol=1e-5
        )

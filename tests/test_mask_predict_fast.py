"""``cmlm_hybrid``'s fairseq-generator path (``generation.refinement``, which decodes decoder
layers the lean loop does not know; forced here with ``lean = False``) decodes the shipped
student as fairseq's own generator with forced passes, and as the lean loop (and fairseq's own
where that keeps no mask) with adaptive stop; the CPU's length-sorted sub-batches; the cache."""

from __future__ import annotations

from argparse import Namespace

import pytest
import torch
from fairseq.iterative_refinement_generator import IterativeRefinementGenerator

from fairseq_ext.modules.cross_attention_cache import cross_attention_cache
from tests.conftest import ROOT, load_shipped_student, read_sample

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


def generator(task, model, passes: int, beam: int, force: bool, lean: bool, history: bool):
    """``cmlm_hybrid``'s generator, which picks the lean loop for the student; ``lean=False``:
    its fairseq-generator path."""
    gen = task.build_generator(
        [model],
        Namespace(
            iter_decode_max_iter=passes - 1,
            iter_decode_with_beam=beam,
            iter_decode_force_max_iter=force,
            retain_iter_history=history,
        ),
    )
    assert gen.lean
    gen.lean = lean
    return gen


@pytest.mark.parametrize("bsz", [1, 12])
@pytest.mark.parametrize("beam", [1, 3])
@pytest.mark.parametrize("passes,force", [(4, True), (10, True), (10, False)])
def test_fairseq_generator_path_decodes_as_fairseq_and_the_lean_loop(
    student, bsz, beam, passes, force
):
    model, task, sources = student
    fallback = generator(task, model, passes, beam, force, lean=False, history=True)
    if force:
        reference = IterativeRefinementGenerator(
            task.tgt_dict, max_iter=passes - 1, beam_size=beam, adaptive=False
        )
    else:
        reference = generator(task, model, passes, beam, force, lean=True, history=False)
    upstream = IterativeRefinementGenerator(task.tgt_dict, max_iter=passes - 1, beam_size=beam)
    kept_masks = 0
    for first in range(0, len(sources) if bsz == 1 else 1, 4 if bsz == 1 else 1):
        sample = batch(sources[first : first + bsz], task.src_dict.pad())
        got = fallback.generate([model], sample)
        with torch.no_grad():
            want = reference.generate([model], sample)
            if not force:  # fairseq's own adaptive stop: the same where it keeps no mask
                for g, u in zip(got, upstream.generate([model], sample), strict=True):
                    if u[0]["tokens"].eq(task.tgt_dict.unk()).any():
                        kept_masks += 1
                    else:
                        assert torch.equal(g[0]["tokens"], u[0]["tokens"])
                        assert g[0]["steps"] == u[0]["steps"]
        for g, w in zip(got, want, strict=True):
            g, w = g[0], w[0]
            assert torch.equal(g["tokens"], w["tokens"])
            assert g["steps"] == w["steps"]
            torch.testing.assert_close(
                g["positional_scores"], w["positional_scores"], rtol=0, atol=1e-5
            )
            torch.testing.assert_close(g["score"], w["score"], rtol=0, atol=1e-5)
            # the start, then each pass's prediction and (but after the last pass) its re-masking
            assert len(g["history"]) == 2 * g["steps"] + (2 if g["steps"] == passes - 1 else 3)
            assert torch.equal(g["history"][-1]["tokens"], g["tokens"])
    assert force or kept_masks > 0  # fairseq's stop kept a mask where ours decoded on


def test_the_cache_is_shared_by_the_length_candidates(student):
    """The keys and values are computed for the sentences (not per candidate)."""
    model, task, sources = student
    sample = batch(sources[:5], task.src_dict.pad())
    with torch.no_grad():
        encoder_out = model.forward_encoder(
            [sample["net_input"]["src_tokens"], sample["net_input"]["src_lengths"]]
        )
        state = cross_attention_cache(model.decoder.layers, encoder_out)
    buffers = [layer.encoder_attn._get_input_buffer(state) for layer in model.decoder.layers]
    heads = model.decoder.layers[0].encoder_attn.num_heads
    assert all(
        b["prev_key"].shape[:2] == (5, heads) and b["prev_value"].shape[:2] == (5, heads)
        for b in buffers
    )


@pytest.mark.parametrize("lean", [True, False])
@pytest.mark.parametrize("beam,force", [(1, True), (3, True), (3, False)])
def test_length_sorted_sub_batches_decode_as_the_whole_batch(student, beam, force, lean):
    """On the CPU a batch of more than ``cpu_chunk`` sentences is decoded as length-sorted
    sub-batches; the hypotheses and their histories are those of the whole batch, in its
    order."""
    model, task, sources = student
    sample = batch(sources, task.src_dict.pad())
    gen = generator(task, model, 10, beam, force, lean, history=True)
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
        assert [h["tokens"].tolist() for h in p["history"]] == [
            h["tokens"].tolist() for h in w["history"]
        ]

"""The lean mask-predict loop (``fairseq_ext.generation.lean_mask_predict``), which
``cmlm_hybrid`` decodes ``hi_cmlm_transformer`` with, gives the hypotheses of the reference
path on the shipped student: fairseq's ``IterativeRefinementGenerator`` over fairseq's CMLM pass
(``CMLMNATransformerModel.forward_decoder``: every slot projected, log-softmax, the encoder
output projected every pass) with ``--iter-decode-force-max-iter``, and ``cmlm_hybrid``'s
generator over that pass under adaptive termination (where fairseq's own stop keeps masked slots,
see ``refinement``). The same tokens and steps, scores within 1e-5, at 1, 4 and 10 passes, length
beam 1 and 3, with and without ``--length-offset``, one sentence at a time and in padded batches
of eight (the sentences in the task's own input format: ``<s>`` in front)."""

from __future__ import annotations

import copy
from argparse import Namespace

import pytest
import torch
from fairseq.iterative_refinement_generator import IterativeRefinementGenerator
from fairseq.modules import LayerNorm

from fairseq_ext.generation.int8 import quantize_for_decoding
from fairseq_ext.generation.lean_mask_predict import _Slots, fairseq_extract_features
from fairseq_ext.masking import HYBRID_STRATEGIES
from fairseq_ext.models.decoding_call import decoding_call
from tests.conftest import ROOT, load_shipped_student, read_sample

MODEL = ROOT / "examples" / "quickstart" / "model"
SENTENCES = 24
# short sources, whose shortest length candidates stop early under adaptive termination (a pass
# that re-masks nothing and changes nothing): their rows leave a batch that decodes on
SHORT = {1: "A dog.", 10: "A woman sings."}


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    import sentencepiece as spm

    model, task = load_shipped_student(tmp_path_factory.mktemp("dicts"))
    sp = spm.SentencePieceProcessor(model_file=str(MODEL / "spm.model"))
    d = task.src_dict
    lines = read_sample("test", "en", SENTENCES - len(SHORT))
    for at, line in sorted(SHORT.items()):
        lines.insert(at, line)
    sources = [
        torch.tensor([d.bos()] + [d.index(p) for p in sp.encode(line, out_type=str)] + [d.eos()])
        for line in lines
    ]
    return model, task, sources


def batches(sources: list[torch.Tensor], pad: int, bsz: int) -> list[dict]:
    """fairseq's left-padded source batches of ``bsz`` sentences."""
    out = []
    for start in range(0, len(sources), bsz):
        part = sources[start : start + bsz]
        S = max(len(s) for s in part)
        src = torch.full((len(part), S), pad)
        for i, s in enumerate(part):
            src[i, S - len(s) :] = s
        out.append(
            {
                "id": torch.arange(start, start + len(part)),
                "net_input": {
                    "src_tokens": src,
                    "src_lengths": torch.tensor([len(s) for s in part]),
                },
            }
        )
    return out


def options(passes: int, beam: int, force: bool) -> Namespace:
    return Namespace(
        iter_decode_max_iter=passes - 1,
        iter_decode_with_beam=beam,
        iter_decode_force_max_iter=force,
    )


def assert_same(got: list, want: list) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = g[0], w[0]
        assert torch.equal(g["tokens"], w["tokens"])
        assert g["steps"] == w["steps"]
        torch.testing.assert_close(
            g["positional_scores"], w["positional_scores"], rtol=0, atol=1e-5
        )
        torch.testing.assert_close(g["score"], w["score"], rtol=0, atol=1e-5)


CASES = [
    (passes, beam, force)
    for passes in (1, 4, 10)
    for beam in (1, 3)
    for force in (True, False)
    if force or passes > 1
]  # one pass decodes the same with either stop


@pytest.mark.parametrize("bsz", [1, 8])
@pytest.mark.parametrize("offset", [0, 2])
@pytest.mark.parametrize("passes,beam,force", CASES)
def test_lean_loop_decodes_as_the_reference(student, passes, beam, force, offset, bsz):
    model, task, sources = student
    task.cfg.length_offset = offset
    lean = task.build_generator([model], options(passes, beam, force))
    assert lean.lean
    if force:
        reference = IterativeRefinementGenerator(
            task.tgt_dict, max_iter=passes - 1, beam_size=beam, adaptive=False
        )
    else:
        reference = task.build_generator([model], options(passes, beam, force))
        reference.lean = False
    rows = sources if bsz > 1 else sources[:8]
    steps = []
    try:
        for sample in batches(rows, task.src_dict.pad(), bsz):
            got = lean.generate([model], sample)
            with torch.no_grad():
                want = reference.generate([model], sample)
            assert_same(got, want)
            assert all(
                not h[0][k].is_inference()
                for h in got
                for k in ("tokens", "positional_scores", "score")
            )
            steps += [h[0]["steps"] for h in got]
    finally:
        task.cfg.length_offset = 0
    if (
        not force and passes == 10 and beam == 3 and offset == 0
    ):  # rows left the batch, others decoded on
        assert min(steps) < passes - 1 == max(steps)


def test_the_batches_have_padding_and_the_offset_changes_lengths(student):
    """The cases above decode padded batches, and ``--length-offset 2`` decodes other lengths."""
    model, task, sources = student
    sample = batches(sources, task.src_dict.pad(), 8)[0]
    assert sample["net_input"]["src_tokens"].eq(task.src_dict.pad()).any()
    lengths = {}
    for offset in (0, 2):
        task.cfg.length_offset = offset
        hypos = task.build_generator([model], options(4, 1, True)).generate([model], sample)
        lengths[offset] = [len(h[0]["tokens"]) for h in hypos]
    task.cfg.length_offset = 0
    assert [a + 2 for a in lengths[0]] == lengths[2]


def test_int8_weights_decode_as_fairseqs_generator_with_them(student):
    """With ``--int8-decoding`` the lean loop runs the quantised layers as fairseq's generator
    does over a decoder that projects the masked slots only (int8's activation scale depends on
    the rows projected; fairseq's CMLM pass projects every slot)."""
    model, task, sources = student
    int8 = quantize_for_decoding(copy.deepcopy(model))
    decoder = int8.decoder

    def masked_slots_forward(normalize, encoder_out, prev_output_tokens, step=0, **unused):
        features, _ = decoder.extract_features(
            prev_output_tokens, encoder_out=encoder_out, embedding_copy=decoder.copies_source()
        )
        masks = prev_output_tokens.eq(decoder.unk)
        out = features.new_zeros(*masks.shape, len(decoder.dictionary))
        out[masks] = decoder.output_layer(features[masks]).log_softmax(-1)
        return out

    gen = task.build_generator([int8], options(10, 3, False))
    assert gen.lean
    for sample in batches(sources, task.src_dict.pad(), 8):
        got = gen.generate([int8], sample)
        gen.lean, decoder.forward = False, masked_slots_forward
        want = gen.generate([int8], sample)
        gen.lean = True
        del decoder.forward
        assert_same(got, want)


def assert_identical(with_history: list, without: list) -> None:
    """The same hypotheses to the bit, history kept on the left only."""
    for g, w in zip(with_history, without, strict=True):
        g, w = g[0], w[0]
        assert "history" in g and "history" not in w
        assert torch.equal(g["tokens"], w["tokens"]) and g["steps"] == w["steps"]
        assert torch.equal(g["positional_scores"], w["positional_scores"])


def assert_same_history(got: list, want: list) -> None:
    """fairseq's ``--retain-iter-history`` entries: the same tokens and steps, no scores."""
    for g, w in zip(got, want, strict=True):
        g, w = g[0]["history"], w[0]["history"]
        assert len(g) == len(w)
        for a, b in zip(g, w):
            assert torch.equal(a["tokens"], b["tokens"]) and a["steps"] == b["steps"]
            for key in ("positional_scores", "score", "hypo_attn", "alignment"):
                assert a[key] is None and b[key] is None


@pytest.mark.parametrize("passes,beam,force", CASES)
def test_iteration_history_is_fairseqs(student, passes, beam, force):
    """``--retain-iter-history``: the lean loop keeps the history of fairseq's generator (over
    fairseq's CMLM pass, as in ``test_lean_loop_decodes_as_the_reference``) and decodes the same
    hypotheses as without it."""
    model, task, sources = student
    args = options(passes, beam, force)
    args.retain_iter_history = True
    lean, plain = task.build_generator([model], args), task.build_generator([model], args)
    plain.retain_history = False
    assert lean.lean and plain.lean and lean.retain_history
    if force:
        reference = IterativeRefinementGenerator(
            task.tgt_dict, max_iter=passes - 1, beam_size=beam, adaptive=False, retain_history=True
        )
    else:
        reference = task.build_generator([model], args)
        reference.lean = False
    steps = []
    for sample in batches(sources, task.src_dict.pad(), 8):
        got = lean.generate([model], sample)
        with torch.no_grad():
            want = reference.generate([model], sample)
        assert_same(got, want)
        assert_same_history(got, want)
        assert_identical(got, plain.generate([model], sample))
        for h in got:
            h = h[0]
            steps.append(h["steps"])
            # the start, then each pass's prediction and (but after the last pass) its re-masking
            assert len(h["history"]) == 2 * h["steps"] + (2 if h["steps"] == passes - 1 else 3)
            assert torch.equal(h["history"][-1]["tokens"], h["tokens"])
            assert h["history"][0]["tokens"][1:-1].eq(task.tgt_dict.unk()).all()
    if not force and passes == 10 and beam == 3:  # rows left the batch with their history
        assert min(steps) < passes - 1 == max(steps)


def test_int8_decodes_the_same_with_and_without_history(student):
    """``--int8-decoding --retain-iter-history`` gives the hypotheses of ``--int8-decoding``: one
    loop projects the same rows either way (int8's activation scale depends on them)."""
    model, task, sources = student
    int8 = quantize_for_decoding(copy.deepcopy(model))
    args = options(10, 3, False)
    plain = task.build_generator([int8], args)
    args.retain_iter_history = True
    kept = task.build_generator([int8], args)
    for sample in batches(sources, task.src_dict.pad(), 8):
        got = kept.generate([int8], sample)
        assert_identical(got, plain.generate([int8], sample))
        assert all(torch.equal(h[0]["history"][-1]["tokens"], h[0]["tokens"]) for h in got)


def with_every_layer_option(model):
    """A copy of ``model`` whose decoder runs every branch of fairseq's decoder layer: pre-norm
    with a final layer norm, and the NormFormer options (``--scale-attn``, ``--scale-heads``,
    ``--scale-fc``, ``--scale-resids``) with random weights."""
    model = copy.deepcopy(model)
    decoder = model.decoder
    torch.manual_seed(0)
    dim = decoder.embed_dim
    for layer in decoder.layers:
        layer.normalize_before = True
        layer.attn_ln = LayerNorm(dim)
        layer.ffn_layernorm = LayerNorm(layer.fc1.out_features)
        layer.c_attn = torch.nn.Parameter(torch.rand(layer.nh) + 0.5)
        layer.w_resid = torch.nn.Parameter(torch.rand(dim) + 0.5)
        for norm in (layer.attn_ln, layer.ffn_layernorm):
            norm.weight.data.uniform_(0.5, 1.5)
            norm.bias.data.uniform_(-0.1, 0.1)
    decoder.layer_norm = LayerNorm(dim)
    return model.eval()


@pytest.mark.parametrize("every_option", [False, True])
@pytest.mark.parametrize("beam", [1, 3])
@pytest.mark.parametrize("strategy", HYBRID_STRATEGIES)
def test_the_copy_of_fairseqs_extract_features_gives_fairseqs_features(
    student, strategy, beam, every_option
):
    """``lean_mask_predict.fairseq_extract_features`` against fairseq's own
    ``NATransformerDecoder.extract_features`` (the encoder output repeated per length candidate):
    the same features, on half-masked padded targets, for every strategy, with the shipped
    decoder's post-norm layers and with every other branch of fairseq's layer."""
    model, task, sources = student
    if every_option:
        model = with_every_layer_option(model)
    decoder, unk = model.decoder, task.tgt_dict.unk()
    sample = batches(sources, task.src_dict.pad(), 8)[0]["net_input"]
    src = sample["src_tokens"]
    with torch.no_grad(), decoding_call(strategy=strategy):
        encoder_out = model.forward_encoder([src, sample["src_lengths"]])
        slots = _Slots(model, encoder_out, src, beam)
        tokens = slots.tokens
        fill = torch.randint(
            4, len(task.tgt_dict), tokens.shape, generator=torch.Generator().manual_seed(1)
        )
        half = tokens.eq(unk) & (
            torch.rand(tokens.shape, generator=torch.Generator().manual_seed(2)) < 0.5
        )
        tokens[half] = fill[half]
        assert tokens.eq(unk).any() and half.any() and slots.padding.any()
        ours = fairseq_extract_features(
            decoder, tokens, encoder_out, slots.padding, slots.positions, slots.copy, slots.kv
        )
        repeated = model.encoder.reorder_encoder_out(encoder_out, slots.sentence)
        theirs, _ = decoder.extract_features(
            tokens, encoder_out=repeated, embedding_copy=decoder.copies_source()
        )
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-5)

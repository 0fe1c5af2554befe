"""``--length-offset N`` (``cmlm_hybrid``): every target length the shipped student predicts at
decoding grows by N before the length beam, and only at decoding (training predicts the
reference's length as before); ``--length-offset-ramp T`` shrinks it by a token for each token a
predicted length has below T; out of range they are refused (the offset on fairseq's own CMLM
decoder too); the hub's default leaves the translations of inputs of a few words as long as
without an offset."""

from __future__ import annotations

import re
from argparse import Namespace

import pytest
import torch
from fairseq.models.nat import NATransformerDecoder

from tests.conftest import ROOT, binarize, generate_args, read_sample, run
from tests.test_int8_decoding import _sample, student  # noqa: F401  (the shipped student, a fixture)

MODEL = ROOT / "examples" / "quickstart" / "model"


def _decode_with(model, task, offset: int, ramp: int = 0):
    """fairseq's own predicted lengths (with <s> and </s>) of 8 sample sentences, the length
    logits and encoder output, and one pass's hypotheses with ``offset`` and ``ramp`` set."""
    sample = _sample(task, 8)
    net = sample["net_input"]
    with torch.no_grad():
        encoder_out = model.forward_encoder([net["src_tokens"], net["src_lengths"]])
        length_out = model.decoder.forward_length(normalize=True, encoder_out=encoder_out)
        predicted = NATransformerDecoder.forward_length_prediction(
            model.decoder, length_out, encoder_out
        )
        task.cfg.length_offset, task.cfg.length_offset_ramp = offset, ramp
        gen = task.build_generator(
            [model], Namespace(iter_decode_max_iter=0, iter_decode_with_beam=1)
        )
        hypos = gen.generate([model], sample)
    task.cfg.length_offset, task.cfg.length_offset_ramp = 0, 0
    return predicted, length_out, encoder_out, hypos


@pytest.mark.parametrize("offset", [-1, 0, 2, 5])
def test_decoding_lengths_are_fairseqs_prediction_plus_the_offset(student, offset):  # noqa: F811
    model, task = student
    reference, length_out, encoder_out, hypos = _decode_with(model, task, offset)
    target = torch.full((8, 5), 7)
    with torch.no_grad():
        trained = model.decoder.forward_length_prediction(
            length_out, encoder_out, tgt_tokens=target
        )
    assert model.decoder.length_offset == offset
    lengths = torch.tensor(
        [len(h[0]["tokens"]) for h in hypos]
    )  # <s> ... </s>, as long as predicted
    assert lengths.tolist() == (reference + offset).clamp(min=2).tolist()
    untouched = NATransformerDecoder.forward_length_prediction(
        model.decoder, length_out, encoder_out, tgt_tokens=target
    )
    assert (
        trained.tolist() == untouched.tolist()
    )  # training targets: the reference's length, no offset


def ramped(offset: int, ramp: int, tokens: int) -> int:
    """The tokens added to a predicted length of ``tokens`` (without <s> and </s>): the offset,
    one token nearer 0 for each token below ``ramp``, and never past 0."""
    size = max(0, abs(offset) - max(0, ramp - tokens))
    return size if offset > 0 else -size


@pytest.mark.parametrize("offset, ramp", [(3, 16), (-2, 14), (5, 255), (2, 0)])
def test_the_ramp_shrinks_the_offset_of_short_predicted_lengths(student, offset, ramp):  # noqa: F811
    model, task = student
    predicted, _, _, hypos = _decode_with(model, task, offset, ramp)
    predicted = predicted.tolist()
    assert model.decoder.length_offset_ramp == ramp
    want = [max(2, n + ramped(offset, ramp, n - 2)) for n in predicted]
    assert [len(h[0]["tokens"]) for h in hypos] == want
    # the ramp acts on this sample's lengths, and 0 leaves the offset as it was
    assert (want != [max(2, n + offset) for n in predicted]) == (ramp > 0)


def test_fairseq_generate_length_offset_ramp_lengthens_long_translations_only(tmp_path):
    data = binarize(
        MODEL / "spm.model",
        tmp_path,
        {"test": (read_sample("test", "en", 12), read_sample("test", "de", 12))},
        srcdict=MODEL / "dict.txt",
    )
    lengths = {}
    for options in (
        ["--length-offset", "0"],
        ["--length-offset", "3", "--length-offset-ramp", "14"],
    ):
        args = generate_args(data, MODEL / "checkpoint.pt", "--iter-decode-max-iter", "3")
        proc = run([*args, *options])
        lengths[len(options)] = {
            line.split("\t")[0]: len(line.split("\t")[2].split())
            for line in proc.stdout.splitlines()
            if line.startswith("H-")
        }
    assert len(lengths[2]) == 12
    assert lengths[4] == {k: n + ramped(3, 14, n) for k, n in lengths[2].items()}
    assert len({ramped(3, 14, n) for n in lengths[2].values()}) >= 2  # the ramp acts


@pytest.mark.parametrize("value", ["256", "-1"])
def test_length_offset_ramp_out_of_range_is_one_line(tmp_path, value):
    data = binarize(
        MODEL / "spm.model",
        tmp_path,
        {"test": (read_sample("test", "en", 2), read_sample("test", "de", 2))},
        srcdict=MODEL / "dict.txt",
    )
    args = generate_args(data, MODEL / "checkpoint.pt", f"--length-offset-ramp={value}")
    proc = run(args, check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert (
        f"fairseq_ext: error: --length-offset-ramp must be in [0, 255], got {value}"
        in proc.stderr.splitlines()
    )


def test_the_api_takes_the_ramp_per_call_as_at_load_and_refuses_bad_values():
    from fairseq_ext import hub
    from fairseq_ext.common.errors import FairseqExtError

    sentences = read_sample("test", "en", 8)
    model = hub.from_pretrained(MODEL, length_offset=3, length_offset_ramp=0, remove_repeats=0)
    loaded = hub.from_pretrained(MODEL, length_offset=3, length_offset_ramp=255, remove_repeats=0)
    plain = hub.from_pretrained(MODEL, length_offset=0, remove_repeats=0).translate(sentences)
    assert loaded.translate(sentences) == plain  # every length is below 255 tokens: no offset
    assert model.translate(sentences, length_offset_ramp=255) == plain
    assert loaded.translate(sentences, length_offset_ramp=0) == model.translate(sentences)
    assert model.translate(sentences) != plain
    assert model.models[0].decoder.length_offset_ramp == 0  # the calls changed nothing
    with pytest.raises(
        FairseqExtError, match=r"^translate: length_offset_ramp must be in \[0, 255\], got 300$"
    ):
        model.translate("A dog runs.", length_offset_ramp=300)
    with pytest.raises(
        TypeError,
        match=r"^translate: length_offset_ramp must be an integer in \[0, 255\], got str '9'$",
    ):
        model.translate("A dog runs.", length_offset_ramp="9")
    with pytest.raises(
        FairseqExtError,
        match=r"^from_pretrained: length_offset_ramp must be in \[0, 255\], got -1$",
    ):
        hub.from_pretrained(MODEL, length_offset_ramp=-1)


SHORT = ["A dog runs.", "A woman sings.", "Two men talk.", "The girl is smiling.", "A bird flies."]


def test_the_default_length_rule_leaves_short_inputs_as_long_and_lengthens_long_ones():
    """With the hub's defaults, inputs of a few words translate as without a length offset (the
    same removal of repeats): the offset of 3 at every length, the previous default, lengthens
    them ("Ein Hund rennt mit einer Min Hund rennt."). The test sample comes out longer."""
    from fairseq_ext import hub

    model = hub.from_pretrained(MODEL)
    assert model.translate(SHORT) == model.translate(SHORT, length_offset=0)
    words = [len(s.split()) for s in model.translate(SHORT, length_offset_ramp=0)]
    assert words != [len(s.split()) for s in model.translate(SHORT, length_offset=0)]
    sample = read_sample("test", "en", 40)
    default, plain = model.translate(sample), model.translate(sample, length_offset=0)
    assert sum(len(s.split()) for s in default) > sum(len(s.split()) for s in plain)


def test_fairseq_generate_length_offset_lengthens_every_hypothesis(tmp_path):
    data = binarize(
        MODEL / "spm.model",
        tmp_path,
        {"test": (read_sample("test", "en", 12), read_sample("test", "de", 12))},
        srcdict=MODEL / "dict.txt",
    )
    lengths = {}
    for offset in (0, 3):
        proc = run(
            generate_args(
                data,
                MODEL / "checkpoint.pt",
                "--iter-decode-max-iter",
                "3",
                "--length-offset",
                str(offset),
            )
        )
        lengths[offset] = {
            line.split("\t")[0]: len(line.split("\t")[2].split())
            for line in proc.stdout.splitlines()
            if line.startswith("H-")
        }
    assert len(lengths[0]) == 12 and {k: v + 3 for k, v in lengths[0].items()} == lengths[3]


def test_length_offset_out_of_range_is_one_line(tmp_path):
    data = binarize(
        MODEL / "spm.model",
        tmp_path,
        {"test": (read_sample("test", "en", 2), read_sample("test", "de", 2))},
        srcdict=MODEL / "dict.txt",
    )
    proc = run(generate_args(data, MODEL / "checkpoint.pt", "--length-offset", "17"), check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert (
        "fairseq_ext: error: --length-offset must be in [-16, 16], got 17"
        in proc.stderr.splitlines()
    )


def test_the_hub_takes_the_offset_and_refuses_one_out_of_range():
    from fairseq_ext import hub
    from fairseq_ext.common.errors import FairseqExtError

    sentences = read_sample("test", "en", 6)
    plain = hub.from_pretrained(MODEL, length_offset=0).translate(sentences, passes=4)
    longer = hub.from_pretrained(MODEL, length_offset=2).translate(sentences, passes=4)
    assert sum(len(s.split()) for s in longer) > sum(len(s.split()) for s in plain)
    with pytest.raises(FairseqExtError, match=r"--length-offset must be in \[-16, 16\], got 20"):
        hub.from_pretrained(MODEL, length_offset=20)


def test_a_per_call_offset_that_empties_outputs_is_warned_with_their_share():
    """``translate(..., length_offset=-16)``: the outputs it empties are counted in one warning
    (issue 83: 15 of 17 came back empty without a word); offset 0 empties none of them."""
    from fairseq_ext import hub

    model = hub.from_pretrained(MODEL)
    sentences = read_sample("test", "en", 17)
    with pytest.warns(UserWarning) as caught:
        outputs = model.translate(sentences, passes=4, length_offset=-16)
    empty = sum(not output for output in outputs)
    assert empty >= 10
    assert [str(w.message) for w in caught if str(w.message).startswith("translate:")] == [
        f"translate: {empty} of 17 outputs are empty: length_offset=-16 cuts every predicted "
        "length by 16 tokens; give an offset closer to 0 (0 decodes as the model was trained)"
    ]
    assert all(model.translate(sentences, passes=4))


def test_fairseq_generate_notes_the_translations_an_offset_empties(tmp_path):
    data = binarize(
        MODEL / "spm.model",
        tmp_path,
        {"test": (read_sample("test", "en", 17), read_sample("test", "de", 17))},
        srcdict=MODEL / "dict.txt",
    )
    args = generate_args(data, MODEL / "checkpoint.pt", "--iter-decode-max-iter", "3")
    proc = run([*args, "--length-offset", "-16", "--batch-size", "17"])
    empty = sum(
        line.split("\t")[2] == "" for line in proc.stdout.splitlines() if line.startswith("H-")
    )
    notes = re.findall(
        r"^fairseq_ext: --length-offset -16 left (\d+) of (\d+) translations of a batch empty ",
        proc.stderr,
        re.M,
    )
    # one line per batch that had any (the CPU decodes sub-batches of 16)
    assert empty >= 10 and sum(int(n) for n, _ in notes) == empty
    assert sum(int(m) for _, m in notes) <= 17
    assert "--length-offset" not in run(args).stderr

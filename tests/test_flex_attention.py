"""``--attention-backend flex`` (``modules.flex_attention``) against the dense path, which the
model tests check against explicit softmaxes: UniLM's prefix, causal and permutation masks
with padding and ProphetNet's n-stream attention (n = 2, with numbered and given positions)
give the dense outputs within 1e-5 in float32, and cached decoding of a flex model (dense
steps) matches its flex full pass. On CPU torch's flex_attention runs forward only, so these
run without gradients; the forward + backward comparisons are CUDA-marked. The option parses,
and every refusal (unknown backend, attention dropout in training, a CPU backward, a torch
without FlexAttention, ``gpu.flex_vs_dense`` without CUDA) is one line."""

import pytest
import torch

from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.generation import UniLMSequenceGenerator
from fairseq_ext.masking import random_order
from fairseq_ext.modules import flex_attention
from reproduction.gpu import flex_vs_dense
from tests import test_prophetnet_model as prophetnet
from tests import test_unilm_model as unilm
from tests.helpers.families import build, dict_folder

TOLERANCE = 1e-5
# CUDA's compiled flex_attention wants heads of at least 16 dimensions
CUDA_UNILM = dict(encoder_embed_dim=64, encoder_attention_heads=4)
CUDA_PROPHETNET = dict(heads=4, dim=64)


def _unilm_pair(attention_mask: str, **dims):
    """A dense and a flex ``unilm_transformer`` with the same weights."""
    d = unilm.dictionary()
    _, dense = unilm.build(d, attention_mask, **dims)
    _, flex = unilm.build(d, attention_mask, attention_backend="flex", **dims)
    flex.load_state_dict(dense.state_dict())
    return d, dense, flex


def _unilm_inputs(d, attention_mask: str) -> dict:
    """A padded batch of the mask's task: seq2seq pairs (prefix, causal) or shuffled LM input
    (permutation)."""
    if attention_mask == "permutation":
        tokens = unilm._lm_tokens(d)
        order = random_order(
            tokens.eq(d.pad()), keep_first=1, generator=torch.Generator().manual_seed(5)
        )
        return {"src_tokens": tokens, "order": order}
    src, _, prev = unilm.batch(d)
    return {"src_tokens": src, "prev_output_tokens": prev}


def _prophetnet_pair(**dims):
    dense = prophetnet.build(ngram=2, **dims)
    flex = prophetnet.build(ngram=2, attention_backend="flex", **dims)
    flex.load_state_dict(dense.state_dict())
    return dense, flex


def _prophetnet_inputs(given_positions: bool) -> dict:
    """A batch with a right-padded target; pre-training's positions (per example, from a span
    inside the article) or fine-tuning's (numbered from the start)."""
    src, prev = prophetnet.batch()
    prev[1, 6:] = 1  # padding
    inputs = {
        "src_tokens": src,
        "src_lengths": torch.full((3,), src.size(1)),
        "prev_output_tokens": prev,
    }
    if given_positions:
        inputs["decoder_positions"] = torch.arange(prev.size(1)) + torch.tensor([[3], [20], [2]])
    return inputs


def _stream_logits(model, inputs) -> list:
    return model(**inputs)[1]["stream_logits"]


@pytest.mark.parametrize("attention_mask", ["prefix", "causal", "permutation"])
def test_unilm_flex_forward_equals_dense(attention_mask):
    d, dense, flex = _unilm_pair(attention_mask)
    inputs = _unilm_inputs(d, attention_mask)
    padding = inputs["src_tokens"].eq(d.pad())
    assert padding.any()
    assert flex_attention.is_block_mask(
        flex.encoder._full_mask(padding, torch.zeros_like(padding).long())
    )
    with torch.no_grad():
        want, got = dense(**inputs)[0], flex(**inputs)[0]
    assert got.shape == want.shape
    assert (got - want).abs().max() <= TOLERANCE


@pytest.mark.parametrize("given_positions", [False, True], ids=["numbered", "given-positions"])
def test_prophetnet_flex_forward_equals_dense(given_positions):
    dense, flex = _prophetnet_pair()
    inputs = _prophetnet_inputs(given_positions)
    length = inputs["prev_output_tokens"].size(1)
    assert isinstance(
        flex.decoder._self_attention_mask(length, "cpu"), flex_attention.NgramStreamBlockMask
    )
    with torch.no_grad():
        want, got = _stream_logits(dense, inputs), _stream_logits(flex, inputs)
    assert len(got) == len(want) == 2
    for g, w in zip(got, want):
        assert (g - w).abs().max() <= TOLERANCE


def test_prophetnet_cached_steps_of_a_flex_model_equal_its_flex_full_pass():
    _, flex = _prophetnet_pair()
    src, prev = prophetnet.batch(tgt_len=12)
    with torch.no_grad():
        enc = flex.encoder(src, src_lengths=torch.full((3,), src.size(1)))
        full, _ = flex.decoder(prev, enc)
        state, steps = {}, []
        for t in range(prev.size(1)):
            steps.append(flex.decoder(prev[:, : t + 1], enc, incremental_state=state)[0])
    assert (torch.cat(steps, 1) - full).abs().max() <= TOLERANCE


def test_unilm_cached_beam_search_of_a_flex_model_equals_the_dense_model():
    """The flex model's source pass is flex, its decoding steps dense."""
    d, dense, flex = _unilm_pair("prefix")
    src, _, _ = unilm.batch(d, src_lens=(7, 3, 5), tgt_lens=(2, 2, 2), seed=3)
    sample = {
        "net_input": {"src_tokens": src, "src_lengths": src.ne(d.pad()).sum(1)},
        "id": torch.arange(3),
    }
    hypotheses = [
        UniLMSequenceGenerator([m], d, beam_size=2, max_len_b=6, min_len=3).generate([m], sample)
        for m in (dense, flex)
    ]
    for want, got in zip(*hypotheses):
        assert torch.equal(got[0]["tokens"], want[0]["tokens"])
        assert (got[0]["positional_scores"] - want[0]["positional_scores"]).abs().max() <= TOLERANCE


# ------------------------------------------------------------------ the option and its refusals
@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return dict_folder(tmp_path_factory.mktemp("dicts"), 30)


@pytest.mark.parametrize(
    "family, part", [("unilm", "encoder"), ("permutation_lm", "encoder"), ("prophetnet", "decoder")]
)
def test_option_parses_and_defaults_to_dense(folder, family, part):
    _, default, _ = build(folder, family)
    _, chosen, _ = build(folder, family, "--attention-backend", "flex")
    assert getattr(default, part).attention_backend == "dense"
    assert getattr(chosen, part).attention_backend == "flex"


def _one_line_error(call, *fragments: str) -> None:
    with pytest.raises(FairseqExtError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message


def test_unknown_backend_is_refused_in_one_line(folder, capsys):
    """On the command line by its choices; in a checkpoint's options by the model."""
    for family in ("unilm", "prophetnet"):
        with pytest.raises(SystemExit):
            build(folder, family, "--attention-backend", "sparse")
        assert (
            "argument --attention-backend: invalid choice: 'sparse'"
            in capsys.readouterr().err.splitlines()[-1]
        )
    _one_line_error(
        lambda: unilm.build(attention_backend="sparse"), "--attention-backend 'sparse' is unknown"
    )
    _one_line_error(
        lambda: prophetnet.build(attention_backend="sparse"),
        "--attention-backend 'sparse' is unknown",
    )


def test_a_torch_without_flex_attention_is_refused_in_one_line(monkeypatch):
    monkeypatch.setattr(flex_attention, "flex_attention", None)
    _one_line_error(
        lambda: flex_attention.check_attention_backend("flex"),
        "--attention-backend flex needs torch >= 2.5",
        "--attention-backend dense",
    )
    flex_attention.check_attention_backend("dense")


def _training_step(folder, family: str, attention_dropout: str):
    """One forward + backward of a flex model built from a training command line."""
    task, model, _ = build(
        folder, family, "--attention-backend", "flex", "--attention-dropout", attention_dropout
    )
    d = task.source_dictionary
    g = torch.Generator().manual_seed(0)
    src = torch.randint(d.nspecial, len(d), (2, 6), generator=g)
    prev = torch.randint(d.nspecial, len(d), (2, 5), generator=g)
    src[:, -1] = prev[:, 0] = d.eos()
    return lambda: model.train()(src, torch.full((2,), 6), prev)[0].sum().backward()


@pytest.mark.parametrize("family", ["unilm", "prophetnet"])
def test_attention_dropout_in_training_is_refused_in_one_line(folder, family):
    _one_line_error(
        _training_step(folder, family, "0.1"),
        "--attention-backend flex has no attention dropout",
        "--attention-dropout 0.1",
        "train with --attention-dropout 0",
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU refusal")
@pytest.mark.parametrize("family", ["unilm", "prophetnet"])
def test_gradients_on_cpu_are_refused_in_one_line(folder, family):
    _one_line_error(
        _training_step(folder, family, "0"),
        "cannot compute gradients on CPU",
        "--attention-backend dense",
    )


def test_benchmark_without_cuda_stops_with_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as caught:
        flex_vs_dense.main(["--results", str(tmp_path / "out")])
    assert caught.value.code == (
        "flex_vs_dense: no CUDA device here (torch.cuda.is_available() is False): run it "
        "on a machine with an NVIDIA GPU (make gpu-check)"
    )
    assert not (tmp_path / "out").exists()


def test_benchmark_names_the_lengths_where_flex_wins():
    def row(case, tokens, dense_ms, flex_ms):
        return {
            "case": case,
            "tokens": tokens,
            "dense": {"ms": dense_ms, "peak_mib": 1.0},
            "flex": {"ms": flex_ms, "peak_mib": 1.0},
            "flex_speedup": dense_ms / flex_ms,
            "relative_error_fp32": 0.0,
            "relative_error_bf16": 0.0,
            "equal_fp32": True,
            "equal_bf16": True,
        }

    rows = [
        row("unilm_prefix", 128, 1.0, 2.0),
        row("unilm_prefix", 1024, 3.0, 2.0),
        row("prophetnet_ngram2", 128, 1.0, 1.5),
        {"case": "prophetnet_ngram2", "tokens": 1024, "error": "E: x"},
    ]
    wins = flex_vs_dense.flex_wins(rows)
    assert wins == {"unilm_prefix": [1024], "prophetnet_ngram2": []}
    assert not flex_vs_dense.passed(rows) and flex_vs_dense.passed(rows[:3])
    table = flex_vs_dense.render(
        {
            "device": "GPU",
            "torch": "2",
            "layers": 4,
            "batch": 8,
            "repeats": 10,
            "rows": rows,
            "flex_wins": wins,
        }
    )
    assert "- unilm_prefix: flex is faster at 1024 tokens." in table
    assert "| unilm_prefix | 1024 | 3.00 | 2.00 | 1.50x |" in table
    assert "| prophetnet_ngram2 | 1024 | failed: E: x |" in table


@pytest.mark.parametrize("build_case", [flex_vs_dense.unilm_prefix, flex_vs_dense.prophetnet_ngram])
def test_benchmark_cases_run_their_dense_step(build_case):
    """The cases of ``gpu.flex_vs_dense`` build and run (dense; flex needs CUDA for its
    backward)."""
    case = build_case(16, 2, 1, torch.device("cpu"))
    output, input_grad, weight_grad = case.step("dense", torch.float32)
    assert case.tokens == 16
    assert input_grad.shape == output.shape and weight_grad.abs().sum() > 0


# ------------------------------------------------------------------ CUDA: forward and backward
# A key projection's bias has an exactly zero gradient (softmax is unchanged when the same q.b is
# added to every score of a row), so both paths hold only rounding noise there; a gradient below
# this share of the whole gradient's norm is compared with that norm instead of its own.
ZERO_GRADIENT = 1e-9


def _relative_errors(got: dict, want: dict) -> dict:
    grads = [v.flatten().double() for k, v in want.items() if not k.startswith("output")]
    total = float(torch.cat(grads).norm())
    errors = {}
    for k in want:
        scale = float(want[k].double().norm())
        if not k.startswith("output") and scale < ZERO_GRADIENT * total:
            scale = total
        errors[k] = float((got[k] - want[k]).double().norm()) / scale
    return dict(sorted(errors.items(), key=lambda kv: -kv[1]))


def _forward_backward(model, run) -> dict:
    """Outputs and every parameter's gradient of ``run(model)``'s outputs, weighted by a fixed
    ramp (so that every output matters)."""
    model.zero_grad(set_to_none=True)
    outputs = run(model)
    loss = sum(
        (o.float() * torch.linspace(-1, 1, o.numel(), device=o.device).view_as(o)).sum()
        for o in outputs
    )
    loss.backward()
    found = {f"output{i}": o.detach() for i, o in enumerate(outputs)}
    found.update(
        {
            name: p.grad.detach().clone()
            for name, p in model.named_parameters()
            if p.grad is not None
        }
    )
    return found


def _on_cuda(inputs: dict) -> dict:
    return {k: v.cuda() for k, v in inputs.items()}


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (make gpu-check)")
@pytest.mark.parametrize("attention_mask", ["prefix", "causal", "permutation"])
def test_unilm_flex_forward_and_backward_equal_dense_on_cuda(attention_mask):
    d, dense, flex = _unilm_pair(attention_mask, **CUDA_UNILM)
    inputs = _on_cuda(_unilm_inputs(d, attention_mask))
    want = _forward_backward(dense.cuda(), lambda m: [m(**inputs)[0]])
    got = _forward_backward(flex.cuda(), lambda m: [m(**inputs)[0]])
    assert got.keys() == want.keys() and len(want) > 10
    errors = _relative_errors(got, want)
    assert max(errors.values()) <= TOLERANCE, errors


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (make gpu-check)")
@pytest.mark.parametrize("given_positions", [False, True], ids=["numbered", "given-positions"])
def test_prophetnet_flex_forward_and_backward_equal_dense_on_cuda(given_positions):
    dense, flex = _prophetnet_pair(**CUDA_PROPHETNET)
    inputs = _on_cuda(_prophetnet_inputs(given_positions))
    want = _forward_backward(dense.cuda(), lambda m: _stream_logits(m, inputs))
    got = _forward_backward(flex.cuda(), lambda m: _stream_logits(m, inputs))
    assert got.keys() == want.keys()
    assert any(
        "relative_pos_proj" in name for name in want
    )  # the bias's gradient passes through score_mod
    errors = _relative_errors(got, want)
    assert max(errors.values()) <= TOLERANCE, errors


def test_gradient_comparison_flags_a_wrong_gradient_and_reads_zero_gradients_against_the_whole():
    """The CUDA tests' measure: each gradient relative to its own norm, except an exactly zero
    one (a key projection's bias), whose rounding noise is measured against the whole gradient."""
    want = {
        "output0": torch.ones(3),
        "w": torch.tensor([3.0, 4.0]),
        "k_proj.bias": torch.tensor([1e-13, -1e-13]),
    }
    noisy_zero = dict(want, **{"k_proj.bias": torch.tensor([-2e-13, 1e-13])})
    assert max(_relative_errors(noisy_zero, want).values()) < 1e-12
    wrong = dict(want, w=torch.tensor([3.0, 4.5]))
    errors = _relative_errors(wrong, want)
    assert next(iter(errors)) == "w" and errors["w"] == pytest.approx(0.1)

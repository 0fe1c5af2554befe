"""The CUDA paths (``make gpu-check PART=tests``; skipped without a GPU): mask-predict's length
beam on CUDA equals the CPU, cached decoding of ProphetNet and UniLM on CUDA equals full
recomputation, UniLM's prefix attention and ProphetNet's n-stream attention at 512 tokens on
CUDA match a float64 CPU reference, and fp16/bf16 training steps (forward and backward) of
every family match float32 within the tolerances stated in ``HALF_TOLERANCE``.

The CPU versions of these checks are in test_hi_cmlm_model, test_prophetnet_model,
test_unilm_model and test_half_precision; the helpers that build their models and batches
are reused here."""

import argparse
import copy
import math

import pytest
import torch
from fairseq import utils
from fairseq.sequence_generator import SequenceGenerator

from fairseq_ext.generation import UniLMSequenceGenerator
from fairseq_ext.masking import NgramStreamTables
from fairseq_ext.masking.attention import prefix_lm_mask
from fairseq_ext.modules import MaskedSelfAttention, NgramSelfAttention
from tests import test_prophetnet_model as prophetnet
from tests import test_unilm_model as unilm
from tests.helpers.families import build
from tests.test_half_precision import HALF
from tests.test_hi_cmlm_model import _random_model_batch

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs a CUDA device (make gpu-check)"
    ),
]

CUDA = "cuda"


def _on_cuda(sample: dict) -> dict:
    return utils.apply_to_sample(lambda t: t.to(CUDA), sample)


def _relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.double().cpu() - want.double().cpu()).norm() / want.double().norm())


# ------------------------------------------------------------------ decoding on CUDA
@pytest.mark.parametrize("lean", [True, False])  # the lean loop, fairseq's generator
@pytest.mark.parametrize("strategy", ["all_mask", "fence_replace"])
def test_mask_predict_length_beam_on_cuda_equals_the_cpu(tiny_data, strategy, lean):
    """fairseq's own generator crashes here with a length beam (np.argmax of CUDA tensors)."""
    task, model, sample = _random_model_batch(tiny_data, strategy)
    options = argparse.Namespace(
        iter_decode_max_iter=4,
        iter_decode_with_beam=3,
        iter_decode_force_max_iter=True,
        retain_iter_history=True,
    )

    def generator():
        gen = task.build_generator([model], options)
        assert gen.lean
        gen.lean = lean
        return gen

    on_cpu = generator().generate([model], sample)
    model.to(CUDA)
    on_cuda = generator().generate([model], _on_cuda(sample))
    assert len(on_cuda) == len(on_cpu) == sample["target"].size(0)
    for got, want in zip(on_cuda, on_cpu):
        assert got[0]["tokens"].device.type == CUDA
        assert torch.equal(got[0]["tokens"].cpu(), want[0]["tokens"])
        assert [h["tokens"].tolist() for h in got[0]["history"]] == [
            h["tokens"].tolist() for h in want[0]["history"]
        ]
        assert torch.allclose(
            got[0]["positional_scores"].cpu(), want[0]["positional_scores"], atol=1e-4
        )


def _cached_and_recomputed(generator, sample) -> tuple[list, list]:
    """Beam search with the decoder's key/value cache, then with the whole prefix recomputed
    at every step (fairseq calls the decoder without a cache when the ensemble has none)."""
    cached = generator.generate(generator.model.models, sample)
    generator.model.has_incremental = False
    return cached, generator.generate(generator.model.models, sample)


def _assert_same_beams(cached, recomputed, beam: int, atol: float) -> None:
    for beams_a, beams_b in zip(cached, recomputed):
        assert len(beams_a) == len(beams_b) == beam
        for a, b in zip(beams_a, beams_b):
            assert a["tokens"].device.type == CUDA and torch.equal(a["tokens"], b["tokens"])
            assert torch.allclose(a["positional_scores"], b["positional_scores"], atol=atol)


def test_prophetnet_cached_decoding_on_cuda_equals_recomputation():
    model = prophetnet.build(heads=4, ngram=3).to(CUDA)
    src, prev = (t.to(CUDA) for t in prophetnet.batch(tgt_len=20))  # past relative_max_distance 16
    with torch.no_grad():
        enc = model.encoder(src, src_lengths=torch.full((3,), src.size(1), device=CUDA))
        full, _ = model.decoder(prev, enc)
        state = {}
        steps = [
            model.decoder(prev[:, : t + 1], enc, incremental_state=state)[0]
            for t in range(prev.size(1))
        ]
    assert torch.allclose(torch.cat(steps, 1), full, atol=1e-4)

    d = prophetnet.dictionary()
    model = prophetnet.build(heads=2, ngram=2, task=prophetnet.FakeTask(d)).to(CUDA)
    src, _ = prophetnet.batch(bsz=4)
    sample = _on_cuda(
        {
            "id": torch.arange(4),
            "net_input": {"src_tokens": src, "src_lengths": torch.full((4,), src.size(1))},
        }
    )
    with torch.no_grad():
        cached, recomputed = _cached_and_recomputed(
            SequenceGenerator([model], d, beam_size=4, max_len_b=10), sample
        )
    _assert_same_beams(cached, recomputed, 4, atol=1e-4)


@pytest.mark.parametrize("attention_mask", ["prefix", "causal"])
def test_unilm_cached_beam_search_on_cuda_equals_recomputation(attention_mask):
    d = unilm.dictionary()
    _, model = unilm.build(d, attention_mask)
    model = model.double().to(CUDA)
    src, _, _ = unilm.batch(d, src_lens=(7, 3, 5, 2), tgt_lens=(2, 2, 2, 2), seed=3)
    sample = _on_cuda(
        {
            "id": torch.arange(4),
            "net_input": {"src_tokens": src, "src_lengths": src.ne(d.pad()).sum(1)},
        }
    )
    generator = UniLMSequenceGenerator([model], d, beam_size=4, max_len_b=15, min_len=3)
    cached, recomputed = _cached_and_recomputed(generator, sample)
    _assert_same_beams(cached, recomputed, 4, atol=1e-9)


# ------------------------------------------------------------------ attention at real lengths
def test_prefix_attention_at_512_tokens_on_cuda_matches_float64():
    torch.manual_seed(0)
    length, source = 512, torch.tensor([200, 300])
    positions = torch.arange(length)
    segments = (positions >= source[:, None]).long()
    padding = positions >= torch.tensor([500, 512])[:, None]
    allowed = prefix_lm_mask(segments, padding)
    layer = MaskedSelfAttention(768, 12).eval()
    x = torch.randn(2, length, 768)
    with torch.no_grad():
        want, _ = copy.deepcopy(layer).double()(x.double(), allowed)
        got, _ = layer.to(CUDA)(x.to(CUDA), allowed.to(CUDA))
        got_bf16, _ = layer.to(torch.bfloat16)(x.to(CUDA, torch.bfloat16), allowed.to(CUDA))
    assert _relative_error(got, want) < 1e-5
    assert torch.isfinite(got_bf16).all() and _relative_error(got_bf16, want) < 2e-2


def test_ngram_stream_attention_at_512_tokens_on_cuda_matches_the_cpu():
    """The scores are float32 by design (the additive key mask is float32), so the reference
    is the same module on the CPU in float64 weights and inputs."""
    torch.manual_seed(0)
    length, ngram = 512, 2
    tables = NgramStreamTables(length, ngram, 32, 128)
    attention = NgramSelfAttention(768, 12, ngram, 32).eval()
    x = torch.randn((1 + ngram) * length, 2, 768)

    def run(module, inputs, device):
        return module(
            inputs, tables.numbered_buckets(length).to(device), tables.key_mask(length).to(device)
        )

    with torch.no_grad():
        want = run(copy.deepcopy(attention).double(), x.double(), "cpu")
        got = run(attention.to(CUDA), x.to(CUDA), CUDA)
        got_bf16 = run(attention.to(torch.bfloat16), x.to(CUDA, torch.bfloat16), CUDA)
    assert _relative_error(got, want) < 1e-5
    assert torch.isfinite(got_bf16).all() and _relative_error(got_bf16, want) < 2e-2


# ------------------------------------------------------------------ half-precision training steps
FAMILY_DATA = {
    "hi_cmlm": "tiny_data",
    "prophetnet": "tiny_data",
    "posmask": "mono_data",
    "unilm": "tiny_data",
}
# no dropout, and room for every validation sentence (families.build sets 64 positions)
OPTIONS = {
    "hi_cmlm": ("--dropout", "0"),
    "prophetnet": (
        "--dropout",
        "0",
        "--attention-dropout",
        "0",
        "--activation-dropout",
        "0",
        "--max-source-positions",
        "256",
        "--max-target-positions",
        "256",
    ),
    "posmask": ("--dropout", "0", "--attention-dropout", "0"),
    "unilm": ("--dropout", "0", "--attention-dropout", "0", "--max-positions", "256"),
}
# relative error against float32 of (the loss, all gradients as one vector); on the CPU the
# tiny models reach at most 3e-5 and 2e-3 in fp16, 2e-3 and 1.2e-2 in bf16
HALF_TOLERANCE = {torch.float16: (0.005, 0.02), torch.bfloat16: (0.02, 0.08)}
FP16_LOSS_SCALE = 128.0  # fairseq's --fp16-init-scale


class _Backward:
    """The one call that ``task.train_step`` makes on a fairseq optimizer, with the loss scale
    of fairseq's ``FP16Optimizer``."""

    def __init__(self, scale: float):
        self.scale = scale

    def backward(self, loss: torch.Tensor) -> None:
        (loss * self.scale).backward()


def _loss_and_gradients(task, model, criterion, sample, scale: float):
    model.zero_grad(set_to_none=True)
    torch.manual_seed(0)  # the same training noise (HI-CMLM's masks and copies) in every precision
    loss, _, _ = task.train_step(sample, model, criterion, _Backward(scale), update_num=0)
    return float(loss), {
        n: p.grad.float() / scale for n, p in model.named_parameters() if p.grad is not None
    }


@pytest.mark.parametrize("dtype", HALF, ids=["fp16", "bf16"])
@pytest.mark.parametrize("family", list(FAMILY_DATA))
def test_half_precision_training_step_on_cuda_matches_float32(family, dtype, request):
    task, model, criterion = build(
        request.getfixturevalue(FAMILY_DATA[family]), family, *OPTIONS[family]
    )
    task.load_dataset("valid")
    dataset = task.dataset("valid")
    sample = _on_cuda(dataset.collater([dataset[i] for i in range(16)]))
    model.to(CUDA)
    want_loss, want = _loss_and_gradients(task, model, criterion, sample, 1.0)
    scale = FP16_LOSS_SCALE if dtype == torch.float16 else 1.0
    got_loss, got = _loss_and_gradients(
        task, copy.deepcopy(model).to(dtype), criterion, sample, scale
    )
    loss_tolerance, gradient_tolerance = HALF_TOLERANCE[dtype]
    assert math.isfinite(got_loss) and abs(got_loss - want_loss) <= loss_tolerance * abs(want_loss)
    assert got.keys() == want.keys()
    got_vector = torch.cat([got[n].flatten() for n in want])
    want_vector = torch.cat([want[n].flatten() for n in want])
    assert torch.isfinite(got_vector).all()
    assert _relative_error(got_vector, want_vector) <= gradient_tolerance

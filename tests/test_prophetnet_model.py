"""ProphetNet model, criterion and pre-training data against independent references: dense
attention under the full n-stream mask, transformers' ProphetNetForConditionalGeneration,
full recomputation for incremental decoding, and a hand computation of the n-gram loss."""

import argparse
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from fairseq.data import Dictionary, ListDataset
from fairseq.sequence_generator import SequenceGenerator

from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.convert.prophetnet_transformers import (
    correct_predicting_stream_layout,
    from_transformers_state_dict,
    to_transformers_state_dict,
)
from fairseq_ext.criterions.ngram_language_loss import NgramLanguageLoss, stream_weights
from fairseq_ext.data.mask_symbol import MASK_SYMBOL
from fairseq_ext.data.mass_span_dataset import MassSpanDataset, span_lengths
from fairseq_ext.masking import additive_attention_mask, ngram_stream_buckets
from fairseq_ext.masking.ngram_stream import (
    ngram_stream_key_mask,
    ngram_stream_mask,
    relative_position_bucket,
)
from fairseq_ext.models.prophetnet import ProphetNetModel, prophetnet_tiny

VOCAB = 40


def dictionary(n=VOCAB):
    d = Dictionary()
    for i in range(n - d.nspecial):
        d.add_symbol(f"w{i}")
    return d


class FakeTask:
    def __init__(self, src, tgt=None):
        self.source_dictionary, self.target_dictionary = src, tgt or src


def build(heads=4, ngram=2, layers=2, dim=32, seed=0, task=None, **extra):
    options = dict(
        arch="prophetnet_tiny",
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_embed_dim=dim,
        decoder_embed_dim=dim,
        encoder_ffn_embed_dim=2 * dim,
        decoder_ffn_embed_dim=2 * dim,
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        ngram=ngram,
        num_buckets=8,
        relative_max_distance=16,
        max_target_positions=40,
        max_source_positions=41,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
    )
    args = argparse.Namespace(**dict(options, **extra))
    prophetnet_tiny(args)
    torch.manual_seed(seed)
    return ProphetNetModel.build_model(args, task or FakeTask(dictionary())).eval()


def batch(bsz=3, src_len=11, tgt_len=9, seed=1):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, VOCAB, (bsz, src_len), generator=g)
    src[:, -1] = 2
    prev = torch.randint(4, VOCAB, (bsz, tgt_len), generator=g)
    prev[:, 0] = 2
    return src, prev


# ------------------------------------------------------------------ dense reference attention
def test_block_attention_equals_dense_attention_under_full_mask():
    """Every row of the n-stream attention equals softmax over all (1 + n) T keys with the
    full mask and a per-(row, key) bucket bias computed one by one."""
    torch.manual_seed(0)
    model = build(heads=2, ngram=3)
    attn = model.decoder.layers[0].self_attn
    T, n, B, C, H = 5, 3, 2, 32, 2
    d = C // H
    x = torch.randn((1 + n) * T, B, C)
    positions = torch.tensor([[2, 3, 4, 9, 10], [2, 3, 4, 5, 6]])
    got = attn(
        x,
        ngram_stream_buckets(positions, n, 8, 16),
        model.decoder._tables("cpu").key_mask(T),
    )

    mask = ngram_stream_mask(T, n)
    q = attn.q_proj(x) * d**-0.5
    k, v = attn.k_proj(x), attn.v_proj(x)
    rel = attn.relative_pos_proj(x).view((1 + n) * T, B, 8, H)
    want = torch.zeros((1 + n) * T, B, C)
    for b in range(B):
        for r in range((1 + n) * T):
            t = r % T
            query_pos = int(positions[b, t]) + (0 if r < T else 1)
            for h in range(H):
                hs = slice(h * d, (h + 1) * d)
                scores = torch.full(((1 + n) * T,), float("-inf"))
                for c in range((1 + n) * T):
                    if not mask[r, c]:
                        continue
                    key_pos = (
                        int(positions[b, c % T]) if c < T else query_pos
                    )  # own key: distance 0
                    bucket = int(relative_position_bucket(torch.tensor(key_pos - query_pos), 8, 16))
                    scores[c] = q[r, b, hs] @ k[c, b, hs] + rel[r, b, bucket, h]
                want[r, b, hs] = torch.softmax(scores, 0) @ v[:, b, hs]
    want = attn.out_proj(want)
    assert torch.allclose(got, want, atol=1e-5)


# ------------------------------------------------------------------ transformers' ProphetNet
def hf_model(ours, heads, ngram, corrected=True):
    """transformers' ProphetNet with the weights of ``ours``; ``corrected``: its predicting
    streams' relative-position logits gathered in the release's layout
    (``convert.prophetnet_transformers.correct_predicting_stream_layout``)."""
    transformers = pytest.importorskip("transformers")
    dec = ours.decoder
    cfg = transformers.ProphetNetConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        num_encoder_layers=2,
        num_decoder_layers=2,
        num_encoder_attention_heads=heads,
        num_decoder_attention_heads=heads,
        ngram=ngram,
        num_buckets=8,
        relative_max_distance=16,
        max_position_embeddings=dec.embed_positions.num_embeddings,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
    )
    hf = transformers.ProphetNetForConditionalGeneration(cfg).eval()
    hf.load_state_dict(to_transformers_state_dict(ours.state_dict()), strict=True)
    if corrected:
        assert correct_predicting_stream_layout(hf) == 2
    return hf


def compare_with_hf(ours, hf, ngram):
    src, prev = batch()
    target = torch.cat([prev[:, 1:], torch.full((3, 1), 2)], dim=1)
    with torch.no_grad():
        logits, extra = ours(src, torch.full((3,), src.size(1)), prev)
        out = hf(
            input_ids=src,
            attention_mask=torch.ones_like(src),
            decoder_input_ids=prev,
            labels=target,
            use_cache=False,
        )
    streams = extra["stream_logits"]
    assert len(streams) == ngram and streams[0] is logits
    assert torch.allclose(logits, out.logits, atol=1e-4)
    for k in range(1, ngram):
        assert torch.allclose(streams[k], out.logits_ngram[:, k - 1], atol=1e-4)
    hf_streams = [out.logits] + [out.logits_ngram[:, k] for k in range(ngram - 1)]
    for ours_k, theirs_k in zip(streams, hf_streams):  # per-token losses
        a = F.cross_entropy(ours_k.transpose(1, 2), target, reduction="none")
        b = F.cross_entropy(theirs_k.transpose(1, 2), target, reduction="none")
        assert torch.allclose(a, b, atol=1e-4)
    sample = {
        "net_input": {
            "src_tokens": src,
            "src_lengths": torch.full((3,), src.size(1)),
            "prev_output_tokens": prev,
        },
        "target": target,
        "ntokens": target.numel(),
    }
    loss, sample_size, _ = NgramLanguageLoss(FakeTask(dictionary()))(ours, sample)
    assert math.isclose(float(loss) / sample_size, float(out.loss), rel_tol=1e-4)


def strong_relative_positions(model):
    """Scale the relative-position projections so that their logits matter (at the small
    random initialisation a wrong bias moves the logits by only about 1e-4)."""
    with torch.no_grad():
        for layer in model.decoder.layers:
            layer.self_attn.relative_pos_proj.weight.mul_(30)
    return model


@pytest.mark.parametrize("ngram", [2, 3])
def test_equals_transformers_with_its_predicting_layout_corrected(ngram):
    """Several heads and streams, relative positions on: every stream's logits, the per-token
    losses and the mean loss equal transformers' once its predicting streams gather their
    relative-position logits in the release's layout (docs/prophetnet.md)."""
    ours = strong_relative_positions(build(heads=4, ngram=ngram))
    compare_with_hf(ours, hf_model(ours, 4, ngram), ngram)


def test_transformers_as_released_differs_only_through_that_layout():
    """Uncorrected, transformers' predicting streams differ (a query gets another query's
    relative-position bias); with the relative-position projection zeroed, or with one head and
    one stream, where both layouts coincide, it equals ours unchanged."""
    ours = strong_relative_positions(build(heads=4, ngram=2))
    src, prev = batch()
    with torch.no_grad():
        logits, _ = ours(src, torch.full((3,), src.size(1)), prev)
        out = hf_model(ours, 4, 2, corrected=False)(
            input_ids=src,
            attention_mask=torch.ones_like(src),
            decoder_input_ids=prev,
            use_cache=False,
        )
    assert (
        logits - out.logits
    ).abs().max() > 20 * 1e-4  # 20 x the tolerance the corrected model meets
    zeroed = build(heads=4, ngram=3)
    with torch.no_grad():
        for layer in zeroed.decoder.layers:
            layer.self_attn.relative_pos_proj.weight.zero_()
            layer.self_attn.relative_pos_proj.bias.zero_()
    compare_with_hf(zeroed, hf_model(zeroed, 4, 3, corrected=False), 3)
    single = build(heads=1, ngram=1)
    compare_with_hf(single, hf_model(single, 1, 1, corrected=False), 1)


def test_state_dict_round_trip_is_exact():
    ours = build(heads=4, ngram=3)
    sd = ours.state_dict()
    back = from_transformers_state_dict(to_transformers_state_dict(sd))
    params = {k for k in sd if not k.endswith(".version")}
    assert set(back) == params
    assert all(torch.equal(back[k], sd[k]) for k in params)


def test_main_stream_equals_transformers_with_relative_positions():
    """The main stream, whose relative positions transformers computes correctly, agrees for
    several heads and streams at every layer without the correction."""
    ours = build(heads=4, ngram=2)
    hf = hf_model(ours, 4, 2, corrected=False)
    src, prev = batch()
    captured = []
    hooks = [
        layer.register_forward_hook(lambda m, i, o: captured.append(o))
        for layer in ours.decoder.layers[:-1]
    ]
    with torch.no_grad():
        ours(src, torch.full((3,), src.size(1)), prev)
        out = hf(
            input_ids=src,
            attention_mask=torch.ones_like(src),
            decoder_input_ids=prev,
            use_cache=False,
            output_hidden_states=True,
        )
    for h in hooks:
        h.remove()
    T = prev.size(1)
    for layer, ours_states in enumerate(captured):
        theirs = out.decoder_hidden_states[layer + 1]
        assert torch.allclose(ours_states[:T].transpose(0, 1), theirs, atol=1e-4)


# ------------------------------------------------------------------ incremental decoding
def test_incremental_steps_equal_full_recomputation():
    model = build(heads=4, ngram=3)
    src, prev = batch(tgt_len=20)  # beyond relative_max_distance 16: the capped buckets too
    with torch.no_grad():
        enc = model.encoder(src, src_lengths=torch.full((3,), src.size(1)))
        full, _ = model.decoder(prev, enc)
        state, steps = {}, []
        for t in range(prev.size(1)):
            out, extra = model.decoder(prev[:, : t + 1], enc, incremental_state=state)
            assert out.shape == (3, 1, VOCAB) and "stream_logits" not in extra
            steps.append(out)
    assert torch.allclose(torch.cat(steps, 1), full, atol=1e-5)


def test_beam_search_tokens_equal_full_recomputation():
    d = dictionary()
    model = build(heads=2, ngram=2, task=FakeTask(d))
    src, _ = batch(bsz=4)
    sample = {
        "id": torch.arange(4),
        "net_input": {"src_tokens": src, "src_lengths": torch.full((4,), src.size(1))},
    }
    with torch.no_grad():
        greedy = SequenceGenerator([model], d, beam_size=1, max_len_b=8, min_len=8).generate(
            [model], sample
        )
        enc = model.encoder(src, src_lengths=torch.full((4,), src.size(1)))
        prefix = torch.full((4, 1), d.eos())
        for _ in range(8):  # greedy by recomputing the whole prefix, EOS banned like min_len does
            logits, _ = model.decoder(prefix, enc)
            logits[:, -1, d.eos()] = -math.inf
            logits[:, -1, d.pad()] = -math.inf
            logits[:, -1, d.unk()] = -math.inf
            prefix = torch.cat([prefix, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        for i in range(4):
            assert torch.equal(greedy[i][0]["tokens"][:-1], prefix[i, 1:])

        beam = SequenceGenerator(
            [model], d, beam_size=4, max_len_b=10, no_repeat_ngram_size=2
        ).generate([model], sample)
        for i in range(4):
            for hypo in beam[i]:
                tokens = hypo["tokens"]
                prev = torch.cat([torch.tensor([d.eos()]), tokens[:-1]]).unsqueeze(0)
                logits, _ = model.decoder(
                    prev,
                    {
                        k: [t[:, i : i + 1] if t.dim() == 3 else t[i : i + 1] for t in v]
                        for k, v in enc.items()
                        if k in ("encoder_out", "encoder_padding_mask")
                    },
                )
                lprobs = F.log_softmax(logits[0], -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
                assert torch.allclose(hypo["positional_scores"], lprobs, atol=1e-4)


# ------------------------------------------------------------------ the n-gram loss
class FixedLogits(torch.nn.Module):
    """A stand-in model that returns given stream logits."""

    def __init__(self, streams):
        super().__init__()
        self.streams = streams

    def forward(self, **unused):
        return self.streams[0], {"stream_logits": self.streams}


def hand_loss(streams, target, weights, eps, pad):
    """sum_j alpha_j sum_t [(1 - eps - eps_i) nll + eps_i smooth], written out with floats."""
    total = 0.0
    for logits, alpha, tgt in zip(streams, weights, target):
        for b in range(logits.size(0)):
            for t in range(logits.size(1)):
                if tgt[b][t] == pad:
                    continue
                row = [float(v) for v in logits[b, t]]
                top = max(row)
                lse = top + math.log(sum(math.exp(v - top) for v in row))
                lp = [v - lse for v in row]
                eps_i = eps / (len(row) - 1)
                total += alpha * ((1 - eps - eps_i) * -lp[tgt[b][t]] + eps_i * -sum(lp))
    return total


@pytest.mark.parametrize(
    "gamma,eps,disable", [(1.0, 0.0, False), (0.5, 0.1, False), (2.0, 0.0, True)]
)
def test_ngram_loss_equals_hand_computation(gamma, eps, disable):
    d = dictionary(9)
    g = torch.Generator().manual_seed(0)
    streams = [torch.randn(2, 3, 9, generator=g) for _ in range(3)]
    target = torch.tensor([[5, 6, 2], [7, 2, d.pad()]])
    sample = {"net_input": {}, "target": target, "ntokens": 5}
    crit = NgramLanguageLoss(
        FakeTask(d), ngram_gamma=gamma, label_smoothing=eps, disable_ngram_loss=disable
    )
    loss, sample_size, log = crit(FixedLogits(streams), sample)
    weights = [1.0] if disable else [gamma**j / sum(gamma**i for i in range(3)) for j in range(3)]
    assert stream_weights(3, gamma) == pytest.approx(
        [gamma**j / sum(gamma**i for i in range(3)) for j in range(3)]
    )
    want = hand_loss(streams[: len(weights)], [target.tolist()] * 3, weights, eps, d.pad())
    assert sample_size == 5 and float(loss) == pytest.approx(want, rel=1e-5)
    for k in range(3):  # every stream logged, trained or not
        assert log[f"s{k + 1}_count"] == 5
        correct = int(((streams[k].argmax(-1) == target) & target.ne(d.pad())).sum())
        assert log[f"s{k + 1}_correct"] == correct


def test_pretraining_streams_skip_the_start_of_each_span():
    d = dictionary(9)
    streams = [torch.zeros(1, 4, 9) for _ in range(3)]
    sample = {
        "net_input": {},
        "target": torch.tensor([[5, 6, 7, 8]]),
        "ntokens": 4,
        "span_offset": torch.tensor([[0, 1, 2, 0]]),
    }
    _, _, log = NgramLanguageLoss(FakeTask(d))(FixedLogits(streams), sample)
    assert [log[f"s{k}_count"] for k in (1, 2, 3)] == [4, 2, 1]
    uniform = math.log(9)
    assert float(log["s2_loss"]) == pytest.approx(2 * uniform, rel=1e-5)


def test_criterion_options_are_validated():
    with pytest.raises(FairseqExtError, match="--ngram-gamma must be a finite number > 0"):
        NgramLanguageLoss(FakeTask(dictionary()), ngram_gamma=0.0)
    with pytest.raises(FairseqExtError, match="--label-smoothing"):
        NgramLanguageLoss(FakeTask(dictionary()), label_smoothing=1.0)


# ------------------------------------------------------------------ options of the model
@pytest.mark.parametrize(
    "options,message",
    [
        ({"ngram": 0}, "--ngram must be >= 1"),
        ({"ngram": 41}, "larger than the decoder's positions table"),
        ({"num_buckets": 1}, "--num-buckets must be >= 2"),
        ({"relative_max_distance": 4}, "--relative-max-distance must be larger"),
    ],
)
def test_model_options_are_validated(options, message):
    with pytest.raises(FairseqExtError, match=message):
        build(heads=2, **options)


def test_separate_dictionaries_are_refused():
    with pytest.raises(FairseqExtError, match="--joined-dictionary"):
        build(task=FakeTask(dictionary(40), dictionary(48)))


def test_num_buckets_is_honoured_everywhere():
    model = build(heads=2, ngram=2, num_buckets=5, relative_max_distance=9)
    attn = model.decoder.layers[0].self_attn
    assert attn.relative_pos_proj.out_features == 5 * 2
    src, prev = batch(tgt_len=30)
    with torch.no_grad():  # full pass and incremental steps index only the 5 buckets
        enc = model.encoder(src, src_lengths=torch.full((3,), src.size(1)))
        full, _ = model.decoder(prev, enc)
        state = {}
        steps = torch.cat(
            [model.decoder(prev[:, : t + 1], enc, incremental_state=state)[0] for t in range(30)], 1
        )
    assert torch.allclose(full, steps, atol=1e-5)
    assert int(model.decoder._tables("cpu").numbered_buckets(30).max()) == 4


# ------------------------------------------------------------------ pre-training data
def test_mass_span_dataset_items():
    d = dictionary(30)
    d.add_symbol(MASK_SYMBOL)
    mask = d.index("<mask>")
    lines = [torch.tensor(list(range(4, 4 + n)) + [d.eos()]) for n in (3, 70, 140)]
    data = MassSpanDataset(
        ListDataset(lines, np.array([len(x) for x in lines])),
        np.array([len(x) for x in lines]),
        d,
        mask,
        seed=1,
    )
    for i, line in enumerate(lines):
        item = data[i]
        tokens = line.tolist()
        pos = (item["positions"] - d.pad() - 1).tolist()
        assert len(pos) == data.tgt_sizes[i] == span_lengths(len(tokens) - 1, 64, 0.15)
        assert item["target"].tolist() == [tokens[p] for p in pos]
        assert item["prev_output_tokens"].tolist() == [
            tokens[p - 1] if p > 0 else d.eos() for p in pos
        ]
        assert tokens[-1] == d.eos() and len(tokens) - 1 not in pos
        changed = [j for j in range(len(tokens)) if int(item["source"][j]) != tokens[j]]
        assert set(changed) <= set(pos)
        starts = [p for p in pos if p - 1 not in pos]
        assert item["span_offset"].tolist() == [p - max(s for s in starts if s <= p) for p in pos]
        assert torch.equal(data[i]["source"], item["source"])  # same epoch, same corruption
    first_epoch = data[2]["source"]
    data.set_epoch(2)
    assert not torch.equal(data[2]["source"], first_epoch)  # a new corruption each epoch
    batch_ = data.collater([data[0], data[2]])
    assert batch_["net_input"]["prev_output_tokens"].shape == batch_["target"].shape
    assert batch_["net_input"]["decoder_positions"].shape == batch_["target"].shape
    assert batch_["ntokens"] == int(data.tgt_sizes[0] + data.tgt_sizes[2])


def test_decoder_tables_are_built_once_and_slice_to_every_length():
    """Masks and buckets come from one table per device at --max-target-positions; every length
    and decoding step slices it and equals the masking rules built at that length."""
    model = build(heads=2, ngram=3)
    dec = model.decoder
    for length in (1, 5, 17, 40):
        assert torch.equal(
            dec._tables("cpu").key_mask(length),
            additive_attention_mask(ngram_stream_key_mask(length, 3), torch.float32),
        )
        assert torch.equal(
            dec._tables("cpu").numbered_buckets(length),
            ngram_stream_buckets(torch.arange(length), 3, 8, 16),
        )
    for step in (0, 3, 20, 39):
        buckets, mask = dec._tables("cpu").step(step)
        d = torch.arange(step + 1)
        assert torch.equal(
            buckets[0], relative_position_bucket(d - step, 8, 16)
        )  # main query at step
        assert torch.equal(
            buckets[1], relative_position_bucket(d - step - 1, 8, 16)
        )  # stream 1: one further
        assert torch.equal(mask[0, :-1], torch.zeros(step + 1)) and mask[0, -1] < -1e30
        assert torch.equal(mask[1], torch.zeros(step + 2))
    assert len(dec._fixed_tables) == 1


def test_equals_corrected_transformers_on_padded_batches():
    """Sources of different lengths (padded on the right, as transformers numbers positions from
    the left edge) and padded targets: the logits of every real target position agree."""
    ours = strong_relative_positions(build(heads=4, ngram=2))
    hf = hf_model(ours, 4, 2)
    src, prev = batch(bsz=3, src_len=11, tgt_len=9)
    src_len = torch.tensor([11, 7, 4])
    tgt_len = torch.tensor([9, 5, 3])
    src = src.masked_fill(torch.arange(11) >= src_len.unsqueeze(1), 1)
    src[torch.arange(3), src_len - 1] = 2
    prev = prev.masked_fill(torch.arange(9) >= tgt_len.unsqueeze(1), 1)
    with torch.no_grad():
        _, extra = ours(src, src_len, prev)
        out = hf(
            input_ids=src,
            attention_mask=src.ne(1).long(),
            decoder_input_ids=prev,
            decoder_attention_mask=prev.ne(1).long(),
            use_cache=False,
        )
    real = prev.ne(1)
    assert torch.allclose(extra["stream_logits"][0][real], out.logits[real], atol=1e-4)
    assert torch.allclose(extra["stream_logits"][1][real], out.logits_ngram[:, 0][real], atol=1e-4)

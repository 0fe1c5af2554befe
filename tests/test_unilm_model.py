"""unilm_transformer in process: the attention path against an explicit softmax, fp16/bf16,
the key/value cache, cached beam search == full recomputation, the loss covers target tokens
only, the permutation LM (Su 2019's shuffle == the permutation mask, no leak), and the
initialisation from RoBERTa with and without --keep-tokens."""

import argparse
import logging
import math

import pytest
import torch
import torch.nn.functional as F
from fairseq.criterions.label_smoothed_cross_entropy import LabelSmoothedCrossEntropyCriterion
from fairseq.data import Dictionary
from fairseq.models.roberta import RobertaModel

from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.common.interfaces import PositionMaskingTask
from fairseq_ext.generation import UniLMSequenceGenerator
from fairseq_ext.masking import random_order
from fairseq_ext.masking.attention import (
    bidirectional_mask,
    causal_mask,
    permutation_mask,
    prefix_lm_mask,
)
from fairseq_ext.models.unilm_init import init_from_pretrained
from fairseq_ext.models.unilm_transformer import UniLMTransformerModel, unilm_transformer_tiny
from fairseq_ext.modules import MaskedSelfAttention, MaskedTransformerLayer
from fairseq_ext.tasks.unilm_seq2seq import UniLMSeq2SeqConfig, UniLMSeq2SeqTask

DIMS = dict(
    encoder_layers=2,
    encoder_embed_dim=32,
    encoder_ffn_embed_dim=64,
    encoder_attention_heads=4,
    max_positions=48,
)


def dictionary(n=40) -> Dictionary:
    d = Dictionary()
    for i in range(n):
        d.add_symbol(f"w{i}", n=1000 - i)
    d.add_symbol("<mask>")
    return d


def build(d=None, attention_mask="prefix", keep_tokens=None, seed=0, **dims):
    d = d or dictionary()
    task = UniLMSeq2SeqTask(UniLMSeq2SeqConfig(keep_tokens=keep_tokens), d, d)
    args = argparse.Namespace(
        **{**DIMS, **dims}, attention_mask=attention_mask, dropout=0.0, attention_dropout=0.0
    )
    unilm_transformer_tiny(args)
    torch.manual_seed(seed)
    return task, UniLMTransformerModel.build_model(args, task).eval()


def batch(d, src_lens=(6, 3, 5), tgt_lens=(4, 2, 5), seed=1):
    """fairseq's layout: sources left-padded ``w.. </s>``, targets right-padded."""
    g = torch.Generator().manual_seed(seed)
    B, S, T = len(src_lens), max(src_lens), max(tgt_lens)
    src = torch.full((B, S), d.pad())
    tgt = torch.full((B, T), d.pad())
    for b, (s, t) in enumerate(zip(src_lens, tgt_lens)):
        src[b, S - s :] = torch.randint(d.nspecial, len(d) - 1, (s,), generator=g)
        src[b, -1] = d.eos()
        tgt[b, :t] = torch.randint(d.nspecial, len(d) - 1, (t,), generator=g)
        tgt[b, t - 1] = d.eos()
    prev = torch.full_like(tgt, d.pad())
    prev[:, 0] = d.eos()
    for b, t in enumerate(tgt_lens):
        prev[b, 1:t] = tgt[b, : t - 1]
    return src, tgt, prev


# --- the attention path --------------------------------------------------------------------


def _reference_attention(attn, x, allowed):
    B, T, C = x.shape
    H, dh = attn.num_heads, attn.head_dim

    def heads(t):
        return t.view(B, -1, H, dh).transpose(1, 2)

    q, k, v = heads(attn.q_proj(x)), heads(attn.k_proj(x)), heads(attn.v_proj(x))
    scores = q @ k.transpose(-1, -2) / math.sqrt(dh)
    scores = scores.masked_fill(~allowed.unsqueeze(1), float("-inf"))
    out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
    return attn.out_proj(out)


def _padded_prefix_mask():
    seg = torch.tensor([[0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 1, 1]])
    pad = torch.tensor([[True, False, False, False, False, True], [False] * 6])
    return prefix_lm_mask(seg, pad), pad


def test_attention_matches_explicit_softmax():
    torch.manual_seed(0)
    attn = MaskedSelfAttention(16, 4).double()
    allowed, pad = _padded_prefix_mask()
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    out, _ = attn(x, allowed)
    ref = _reference_attention(attn, x, allowed)
    real = ~pad
    assert torch.allclose(out[real], ref[real], atol=1e-10)


def test_cache_gives_the_full_pass_one_token_at_a_time():
    torch.manual_seed(0)
    layer = MaskedTransformerLayer(16, 32, 4, dropout=0.0, attention_dropout=0.0).double().eval()
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    full, _ = layer(x, causal_mask(torch.zeros(2, 5, dtype=torch.bool)))
    past, steps = None, []
    for t in range(5):
        y, past = layer(x[:, t : t + 1], torch.ones(2, 1, t + 1, dtype=torch.bool), past)
        steps.append(y)
    assert torch.allclose(torch.cat(steps, 1), full, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_is_finite_and_close(dtype):
    torch.manual_seed(0)
    layer = MaskedTransformerLayer(32, 64, 4, dropout=0.0, attention_dropout=0.0).eval()
    allowed, pad = _padded_prefix_mask()
    x = torch.randn(2, 6, 32) * 4
    ref, _ = layer(x, allowed)
    out, _ = layer.to(dtype)(x.to(dtype), allowed)
    assert torch.isfinite(out).all()
    assert torch.allclose(
        out.float()[~pad], ref[~pad], atol=0.1 if dtype == torch.bfloat16 else 0.02
    )


# --- seq2seq ---------------------------------------------------------------------------------


@pytest.mark.parametrize("attention_mask", ["prefix", "causal"])
def test_cached_beam_search_equals_full_recomputation(attention_mask):
    d = dictionary()
    _, model = build(d, attention_mask)
    model = model.double()
    src, _, _ = batch(d, src_lens=(7, 3, 5, 1 + 1), tgt_lens=(2, 2, 2, 2), seed=3)
    sample = {
        "net_input": {"src_tokens": src, "src_lengths": src.ne(d.pad()).sum(1)},
        "id": torch.arange(4),
    }
    gen = UniLMSequenceGenerator([model], d, beam_size=4, max_len_b=15, min_len=3)
    cached = gen.generate([model], sample)
    assert gen.model.has_incremental_states()
    gen.model.has_incremental = False  # fairseq then calls the decoder without a cache
    recomputed = gen.generate([model], sample)
    for beams_a, beams_b in zip(cached, recomputed):
        assert len(beams_a) == 4
        for a, b in zip(beams_a, beams_b):
            assert torch.equal(a["tokens"], b["tokens"])
            assert torch.allclose(a["positional_scores"], b["positional_scores"], atol=1e-9)


def test_generation_never_runs_past_the_positions_table():
    d = dictionary()
    _, model = build(d, max_positions=16)
    src, _, _ = batch(d, src_lens=(10, 4), tgt_lens=(2, 2))
    sample = {
        "net_input": {"src_tokens": src, "src_lengths": src.ne(d.pad()).sum(1)},
        "id": torch.arange(2),
    }
    gen = UniLMSequenceGenerator([model], d, beam_size=2, max_len_b=200, min_len=5)
    out = gen.generate([model], sample)
    assert max(len(h["tokens"]) for hyps in out for h in hyps) <= 16 - 10


def _full_sequence_logits(model, src, prev, d):
    """Brute force: run the stack over the whole ``<s> src </s> tgt`` and return the logits of
    every position with the segment ids."""
    stack = model.encoder
    rows, segs = [], []
    for b in range(src.size(0)):
        s = [d.bos()] + [t for t in src[b].tolist() if t != d.pad()]
        t = [x for x in prev[b, 1:].tolist() if x != d.pad()]
        rows.append(s + t)
        segs.append([0] * len(s) + [1] * len(t))
    out = []
    for tokens, seg in zip(rows, segs):
        tok = torch.tensor([tokens])
        seg = torch.tensor([seg])
        pad = torch.zeros_like(tok, dtype=torch.bool)
        x, _ = stack.hidden_states(
            tok, torch.arange(tok.size(1)).unsqueeze(0), seg, prefix_lm_mask(seg, pad)
        )
        out.append((stack.lm_head(x)[0], seg[0], tok[0]))
    return out


def test_loss_covers_target_tokens_only():
    d = dictionary()
    task, model = build(d)
    model = model.double()
    src, tgt, prev = batch(d)
    sample = {
        "net_input": {
            "src_tokens": src,
            "src_lengths": src.ne(d.pad()).sum(1),
            "prev_output_tokens": prev,
        },
        "target": tgt,
        "ntokens": int(tgt.ne(d.pad()).sum()),
        "id": torch.arange(3),
    }
    criterion = LabelSmoothedCrossEntropyCriterion(task, sentence_avg=False, label_smoothing=0.0)
    with torch.no_grad():
        loss, sample_size, _ = criterion(model, sample)
        logits, _ = model(**sample["net_input"])
        full = _full_sequence_logits(model, src, prev, d)
    assert logits.shape[:2] == tgt.shape  # no prediction is made at source positions
    expected, all_positions = 0.0, 0.0
    for lg, seg, tok in full:
        lp = F.log_softmax(lg, -1)
        nxt = torch.cat([tok[1:], tok.new_tensor([d.eos()])])
        for i in range(len(tok)):
            nll = -float(lp[i, nxt[i]])
            all_positions += nll
            if i + 1 == len(tok) or seg[i + 1] == 1:  # the next token is a target token
                expected += nll
    assert sample_size == int(tgt.ne(d.pad()).sum())
    assert float(loss) == pytest.approx(expected, rel=1e-6)  # fairseq's log_softmax is float32
    assert all_positions > expected + 1.0


def test_source_is_bidirectional_and_target_causal_in_the_model():
    d = dictionary()
    _, model = build(d)
    src, tgt, prev = batch(d, src_lens=(6,), tgt_lens=(5,))
    base, _ = model(src, None, prev)
    later_source = src.clone()
    later_source[0, -2] = d.index("w7") if src[0, -2] != d.index("w7") else d.index("w8")
    changed, _ = model(later_source, None, prev)
    assert not torch.allclose(changed[0, 0], base[0, 0])  # </s> sees every source token
    later_target = prev.clone()
    later_target[0, 3] = d.index("w9") if prev[0, 3] != d.index("w9") else d.index("w10")
    changed, _ = model(src, None, later_target)
    assert torch.allclose(
        changed[0, :3], base[0, :3], atol=1e-6
    )  # the past does not see the future
    assert not torch.allclose(changed[0, 3], base[0, 3])


def test_right_padded_source_gives_the_same_logits():
    d = dictionary()
    _, model = build(d)
    src, tgt, prev = batch(d)
    right = torch.full_like(src, d.pad())
    for b in range(src.size(0)):
        real = src[b][src[b].ne(d.pad())]
        right[b, : len(real)] = real
    a, _ = model(src, None, prev)
    b, _ = model(right, None, prev)
    assert torch.allclose(a, b, atol=1e-5)


# --- permutation language model -------------------------------------------------------------


def _lm_tokens(d, lengths=(7, 5, 6), seed=2):
    g = torch.Generator().manual_seed(seed)
    L = max(lengths) + 2
    tokens = torch.full((len(lengths), L), d.pad())
    for b, n in enumerate(lengths):
        tokens[b, 0] = d.bos()
        tokens[b, 1 : n + 1] = torch.randint(d.nspecial, len(d) - 1, (n,), generator=g)
        tokens[b, n + 1] = d.eos()
    return tokens


def test_shuffled_input_under_causal_mask_equals_permutation_mask():
    """Su 2019's claim: shuffling the input (keeping position ids) under the causal mask is
    the permutation mask over the natural order."""
    d = dictionary()
    _, model = build(d, "permutation")
    model = model.double()
    stack = model.encoder
    tokens = _lm_tokens(d)
    pad = tokens.eq(d.pad())
    order = random_order(pad, keep_first=1, generator=torch.Generator().manual_seed(5))
    shuffled = stack.lm_logits(tokens, order)
    # natural order, permutation mask; each position is told the position that follows it
    rank = torch.empty_like(order).scatter_(1, order, torch.arange(order.size(1)).expand_as(order))
    nxt = torch.full_like(tokens, -1)
    for b in range(tokens.size(0)):
        for p in range(tokens.size(1)):
            k = int(rank[b, p])
            if k + 1 < tokens.size(1) and not pad[b, order[b, k + 1]]:
                nxt[b, p] = order[b, k + 1]
    positions = torch.arange(tokens.size(1)).expand_as(tokens)
    x, _ = stack.hidden_states(
        tokens,
        positions,
        torch.zeros_like(tokens),
        permutation_mask(order, pad),
        next_positions=nxt,
    )
    logits = stack.lm_head(x)
    for b in range(tokens.size(0)):
        for p in range(1, tokens.size(1)):
            if pad[b, p]:
                continue
            predecessor = order[b, rank[b, p] - 1]  # the row that predicts position p
            assert torch.allclose(shuffled[b, p - 1], logits[b, predecessor], atol=1e-9)


def test_permutation_lm_never_sees_what_it_predicts():
    d = dictionary()
    _, model = build(d, "permutation")
    tokens = _lm_tokens(d, lengths=(7,))
    order = torch.tensor([[0, 4, 2, 7, 1, 6, 3, 5, 8]])
    base = model(tokens, order=order)[0]
    for k in range(1, 8):  # change the token that comes k-th in the order
        p = int(order[0, k])
        changed_tokens = tokens.clone()
        changed_tokens[0, p] = d.index("w3") if tokens[0, p] != d.index("w3") else d.index("w4")
        changed = model(changed_tokens, order=order)[0]
        earlier = order[0, 1 : k + 1] - 1  # predictions of positions up to and including p
        later = order[0, k + 1 :] - 1
        assert torch.allclose(changed[0, earlier], base[0, earlier], atol=1e-6)
        if len(later):
            assert not torch.allclose(changed[0, later], base[0, later])


def test_natural_order_is_a_causal_lm():
    d = dictionary()
    _, model = build(d, "causal")
    tokens = _lm_tokens(d)
    identity = torch.arange(tokens.size(1)).expand_as(tokens)
    assert torch.equal(model(tokens)[0], model(tokens, order=identity)[0])


def test_order_that_is_not_a_permutation_is_refused_by_the_model():
    d = dictionary()
    _, model = build(d, "permutation")
    tokens = _lm_tokens(d, lengths=(3,))
    with pytest.raises(
        FairseqExtError, match="not a permutation of 0..4: position 1 appears 0 times"
    ):
        model(tokens, order=torch.tensor([[0, 2, 2, 3, 4]]))
    with pytest.raises(FairseqExtError, match="start with position 0"):
        model(tokens, order=torch.tensor([[1, 0, 2, 3, 4]]))


# --- initialisation from RoBERTa, --keep-tokens -----------------------------------------------


class _Task:
    def __init__(self, d):
        self.source_dictionary = d


def fake_roberta(path, d, **dims):
    """A fairseq RoBERTa model (random weights) saved the way fairseq-train saves it."""
    args = argparse.Namespace(
        **{**DIMS, **dims}, dropout=0.0, attention_dropout=0.0, arch="roberta"
    )
    torch.manual_seed(7)
    roberta = RobertaModel.build_model(args, _Task(d)).eval()
    with torch.no_grad():  # a non-zero LM bias, so that pruning it is visible
        roberta.encoder.lm_head.bias.normal_()
    state = roberta.state_dict()
    state["encoder.classification_heads.x.dense.weight"] = torch.zeros(2, 2)
    torch.save(
        {
            "model": state,
            "cfg": {"model": args},
            "optimizer_history": [
                {
                    "criterion_name": "masked_lm",
                    "optimizer_name": "adam",
                    "lr_scheduler_state": {},
                    "num_updates": 0,
                }
            ],
            "extra_state": {"train_iterator": None},
        },
        path,
    )
    return roberta


def test_init_from_roberta_reproduces_roberta(tmp_path, caplog):
    d = dictionary()
    roberta = fake_roberta(tmp_path / "roberta.pt", d)
    task, model = build(d)
    with caplog.at_level(logging.INFO):
        init_from_pretrained(model, str(tmp_path / "roberta.pt"), d)
    assert "classification_heads.x.dense.weight" in caplog.text
    tokens = torch.tensor([[d.bos(), 5, 9, 12, 7, d.eos()], [d.bos(), 8, 6, 5, d.eos(), d.pad()]])
    pad = tokens.eq(d.pad())
    stack = model.encoder
    x, _ = stack.hidden_states(
        tokens, torch.arange(6).expand(2, 6), torch.zeros_like(tokens), bidirectional_mask(pad)
    )
    theirs = roberta(tokens, features_only=True)[0]
    assert torch.allclose(x[~pad], theirs[~pad], atol=1e-5)
    assert torch.allclose(stack.lm_head(x[~pad]), roberta.encoder.lm_head(theirs[~pad]), atol=1e-5)
    # and the seq2seq source pass is that computation
    sep = model.encoder(torch.tensor([[5, 9, 12, 7, d.eos()], [d.pad(), 8, 6, 5, d.eos()]]))[
        "sep_state"
    ][0]
    assert torch.allclose(sep[:, 0], torch.stack([theirs[0, 5], theirs[1, 4]]), atol=1e-5)


class _PositionMaskingTask(PositionMaskingTask, _Task):
    def max_positions(self):
        return DIMS.get("max_positions", 64)

    def longest_example(self):
        return self.max_positions()


def test_init_from_position_masked_roberta_reproduces_its_encoder(tmp_path, caplog):
    """Su 2019's point with this plugin's own pre-training: a position-masked LM becomes a
    seq2seq model; its position head (mask-position embedding, position classifier) is
    not used and is named in the log."""
    from fairseq_ext.models.position_masked_roberta import PositionMaskedRobertaModel

    d = dictionary()
    args = argparse.Namespace(
        **DIMS, dropout=0.0, attention_dropout=0.0, arch="position_masked_roberta"
    )
    torch.manual_seed(11)
    pm = PositionMaskedRobertaModel.build_model(args, _PositionMaskingTask(d)).eval()
    state = pm.state_dict()
    assert {"encoder.mask_position_embedding", "encoder.position_classifier.weight"} <= set(state)
    torch.save(
        {
            "model": state,
            "cfg": {"model": args},
            "optimizer_history": [
                {
                    "criterion_name": "position_masked_lm",
                    "optimizer_name": "adam",
                    "lr_scheduler_state": {},
                    "num_updates": 0,
                }
            ],
            "extra_state": {"train_iterator": None},
        },
        tmp_path / "pm.pt",
    )
    _, model = build(d)
    with caplog.at_level(logging.INFO):
        init_from_pretrained(model, str(tmp_path / "pm.pt"), d)
    assert (
        "encoder.mask_position_embedding" in caplog.text
        and "encoder.position_classifier" in caplog.text
    )
    tokens = torch.tensor([[d.bos(), 5, 9, 12, 7, d.eos()], [d.bos(), 8, 6, 5, d.eos(), d.pad()]])
    pad = tokens.eq(d.pad())
    x, _ = model.encoder.hidden_states(
        tokens, torch.arange(6).expand(2, 6), torch.zeros_like(tokens), bidirectional_mask(pad)
    )
    theirs = pm(tokens, features_only=True)[0]
    assert torch.allclose(x[~pad], theirs[~pad], atol=1e-5)
    assert torch.allclose(
        model.encoder.lm_head(x[~pad]), pm.encoder.lm_head(theirs[~pad]), atol=1e-5
    )


def test_keep_tokens_keeps_the_listed_rows(tmp_path):
    d = dictionary()
    fake_roberta(tmp_path / "roberta.pt", d)
    keep = ["w2", "w5", "w7", "w11", "w13", "w17", "w19", "w23"]
    (tmp_path / "keep.txt").write_text("".join(f"{w} 1\n" for w in keep))
    full_task, full = build(d)
    init_from_pretrained(full, str(tmp_path / "roberta.pt"), d)
    task, pruned = build(d, keep_tokens=str(tmp_path / "keep.txt"))
    init_from_pretrained(pruned, str(tmp_path / "roberta.pt"), task.full_dictionary, task.keep_ids)
    assert len(task.source_dictionary) == 4 + len(keep)
    assert task.source_dictionary.symbols[4:] == keep
    assert pruned.encoder.embed_tokens.weight.size(0) == 4 + len(keep)
    words = ["w5", "w17", "w2", "w23"]
    full_src = torch.tensor([[d.index(w) for w in words] + [d.eos()]])
    pruned_src = task.lookup[full_src]
    assert task.source_dictionary.string(pruned_src[0, :-1]) == " ".join(words)
    prev_full = torch.tensor([[d.eos(), d.index("w7"), d.index("w11")]])
    a, _ = full(full_src, None, prev_full)
    b, _ = pruned(pruned_src, None, task.lookup[prev_full])
    assert torch.allclose(b, a[..., task.keep_ids], atol=1e-5)


def test_init_refuses_mismatches(tmp_path):
    d = dictionary()
    fake_roberta(tmp_path / "roberta.pt", d)
    _, wider = build(d, encoder_embed_dim=64, encoder_ffn_embed_dim=64)
    with pytest.raises(FairseqExtError, match="has shape .* there and .* here"):
        init_from_pretrained(wider, str(tmp_path / "roberta.pt"), d)
    _, deeper = build(d, encoder_layers=3)
    with pytest.raises(FairseqExtError, match="it has 2 layers, the model 3"):
        init_from_pretrained(deeper, str(tmp_path / "roberta.pt"), d)
    bigger = dictionary(48)
    _, other = build(bigger)
    with pytest.raises(FairseqExtError, match="vocabulary rows but the data's dictionary has"):
        init_from_pretrained(other, str(tmp_path / "roberta.pt"), bigger)


def test_keep_tokens_refuses_unknown_tokens(tmp_path):
    (tmp_path / "keep.txt").write_text("w1\nnot-a-token\n")
    with pytest.raises(
        FairseqExtError, match="'not-a-token' .entry 2. is not in the data's dictionary"
    ):
        build(keep_tokens=str(tmp_path / "keep.txt"))


def test_a_consumed_encoder_out_is_refused_clearly():
    d = dictionary()
    _, model = build(d)
    src, _, _ = batch(d)
    encoder_out = model.encoder(src)
    bos = torch.full((src.size(0), 1), d.eos())
    model.decoder(bos, encoder_out, incremental_state={})
    with pytest.raises(FairseqExtError, match="already used by an incremental decoding run"):
        model.decoder(bos, encoder_out, incremental_state={})


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_model_runs_in_half_precision(dtype):
    d = dictionary()
    _, model = build(d)
    src, _, prev = batch(d)
    ref, _ = model(src, None, prev)
    out, _ = model.to(dtype)(src, None, prev)
    assert out.dtype == dtype and torch.isfinite(out).all()
    assert torch.allclose(out.float(), ref, atol=0.15)


@pytest.mark.parametrize("arch", ["unilm_transformer", "unilm_transformer_tiny"])
def test_options_saved_as_an_argparse_namespace_still_build_the_model(arch):
    """A checkpoint saved before unilm_transformer had a dataclass config holds its model
    options as an argparse Namespace; fairseq builds the model from it (``from_namespace`` for
    the model's own name, the architecture function otherwise), and the options it lacks get
    the config's defaults: the same model, weight for weight and output for output."""
    from fairseq.models import build_model

    d = dictionary()
    task, new = build(d)
    saved = argparse.Namespace(
        **DIMS, attention_mask="prefix", dropout=0.0, attention_dropout=0.0, arch=arch, _name=arch
    )  # no --layernorm-eps, --attention-backend, ...
    old = build_model(saved, task)
    assert isinstance(old, UniLMTransformerModel)
    old.load_state_dict(new.state_dict())
    old.eval()
    src, _, prev = batch(d)
    assert torch.equal(old(src, None, prev)[0], new(src, None, prev)[0])
    assert old.encoder.layernorm_embedding.eps == 1e-5 and old.encoder.attention_backend == "dense"

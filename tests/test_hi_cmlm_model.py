"""hi_cmlm_transformer: all_mask is fairseq's CMLM, the hybrid input is where it belongs,
mask-predict equals fairseq's generator, and bad options are refused clearly."""

import numpy as np
import pytest
import torch
from fairseq import options, tasks
from fairseq.iterative_refinement_generator import IterativeRefinementGenerator

from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.data import CompleteBatchesDataset
from fairseq_ext.masking import source_copy_weight
from tests.conftest import TINY_DIMS, USER_DIR


def build(data, arch="hi_cmlm_transformer_tiny", *extra, seed=0):
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(
        parser,
        [
            str(data),
            "--user-dir",
            USER_DIR,
            "--task",
            "cmlm_hybrid",
            "-s",
            "en",
            "-t",
            "de",
            "--arch",
            arch,
            *TINY_DIMS,
            "--dropout",
            "0",
            "--criterion",
            "nat_loss",
            *extra,
        ],
    )
    task = tasks.setup_task(args)
    torch.manual_seed(seed)
    model = task.build_model(args)
    model.eval()
    return task, model


def a_batch(task, split="test", n=None):
    task.load_dataset(split)
    ds = task.dataset(split)
    idx = list(range(len(ds) if n is None else n))
    return ds.collater([ds[i] for i in idx])


@pytest.mark.parametrize(
    "cmlm_setting", [["--train-copy-share", "0"], ["--train-decoder-input", "decoding_rule"]]
)
def test_all_mask_without_training_copies_is_exactly_fairseq_cmlm(tiny_data, cmlm_setting):
    """The table's "CMLM" row: training loss forward, logit for logit."""
    task, cmlm = build(tiny_data, "cmlm_transformer")
    _, hybrid = build(
        tiny_data,
        "hi_cmlm_transformer_tiny",
        "--hybrid-strategy",
        "all_mask",
        *cmlm_setting,
        seed=1,
    )
    hybrid.load_state_dict(cmlm.state_dict())
    sample = a_batch(task)
    prev = task.inject_noise(sample["target"])
    net = sample["net_input"]
    with torch.no_grad():
        out_ref = cmlm(net["src_tokens"], net["src_lengths"], prev, sample["target"])
        out = hybrid(net["src_tokens"], net["src_lengths"], prev, sample["target"])
    assert torch.equal(out["word_ins"]["out"], out_ref["word_ins"]["out"])
    assert torch.equal(out["length"]["out"], out_ref["length"]["out"])
    assert torch.equal(out["word_ins"]["mask"], out_ref["word_ins"]["mask"])


def _brute_copy(src_emb, src_mask, tgt_mask, tau):
    B, T = tgt_mask.shape
    z = torch.zeros(B, T, src_emb.size(-1), dtype=torch.float64)
    for b in range(B):
        js = [j for j in range(src_mask.size(1)) if src_mask[b, j]]
        is_ = [i for i in range(T) if tgt_mask[b, i]]
        for ti, i in enumerate(is_):
            logits = torch.tensor(
                [-abs(ti / len(is_) - sj / len(js)) / tau for sj in range(len(js))],
                dtype=torch.float64,
            )
            a = torch.softmax(logits, 0)
            z[b, i] = (a[:, None] * src_emb[b, js].double()).sum(0)
    return z


@pytest.mark.parametrize("strategy", ["all_mask", "all_copied", "weighted_sum", "fence_replace"])
def test_decoder_input_of_each_strategy(tiny_data, strategy):
    task, model = build(tiny_data, "hi_cmlm_transformer_tiny", "--hybrid-strategy", strategy)
    sample = a_batch(task)
    torch.manual_seed(5)
    prev = task.inject_noise(sample["target"])
    net = sample["net_input"]
    captured = {}
    model.decoder.layers[0].register_forward_pre_hook(
        lambda mod, args: captured.setdefault("x", args[0])
    )
    with torch.no_grad():
        enc = model.encoder(net["src_tokens"], src_lengths=net["src_lengths"])
        model.decoder(normalize=False, prev_output_tokens=prev, encoder_out=enc)
    x = captured["x"].transpose(0, 1).double()  # B x T x C

    dec = model.decoder
    unk, pad = task.tgt_dict.unk(), task.tgt_dict.pad()
    emb = dec.embed_scale * dec.embed_tokens(prev).double()
    pos = dec.embed_positions(prev).double()
    src_mask = net["src_tokens"].ne(pad)
    z = _brute_copy(enc["encoder_embedding"][0], src_mask, prev.ne(pad), 0.2)
    B, T = prev.shape
    n_copied = 0
    for b in range(B):
        for i in range(T):
            if prev[b, i] == pad:
                continue
            masked = bool(prev[b, i] == unk)
            # the paper's fence (0, 1, 0, 1, ...) read from the first target word (index 1)
            off_fence = [0, 1][(i - 1) % 2] == 0
            if not masked or strategy == "all_mask" or (strategy == "fence_replace" and off_fence):
                expected = emb[b, i]
            elif strategy == "weighted_sum":
                expected = 0.6 * emb[b, i] + 0.4 * z[b, i]
                n_copied += 1
            else:
                expected = z[b, i]
                n_copied += 1
            assert torch.allclose(x[b, i], expected + pos[b, i], atol=1e-5), (strategy, b, i)
    assert (n_copied > 0) == (strategy != "all_mask")


def _training_inputs(model, task, sample, seed):
    """The first decoder layer's input during the loss forward, the embeddings without the
    copy (X) and with it (Z), all B x T x C, and the corrupted decoder input."""
    net = sample["net_input"]
    torch.manual_seed(seed)
    prev = task.inject_noise(sample["target"])
    captured = {}
    hook = model.decoder.layers[0].register_forward_pre_hook(
        lambda mod, args: captured.setdefault("x", args[0])
    )
    with torch.no_grad():
        out = model(net["src_tokens"], net["src_lengths"], prev, sample["target"])
        enc = model.encoder(net["src_tokens"], src_lengths=net["src_lengths"])
    hook.remove()
    dec = model.decoder
    pad = task.tgt_dict.pad()
    pos = dec.embed_positions(prev)
    x_in = captured["x"].transpose(0, 1)
    emb = dec.embed_scale * dec.embed_tokens(prev) + pos
    z = (
        dec.forward_copying_source(
            enc["encoder_embedding"][0], net["src_tokens"].ne(pad), prev.ne(pad)
        )
        + pos
    )
    return x_in, emb, z, prev, out


@pytest.mark.parametrize("share", [0.5, 0.25])
def test_paper_training_gives_z_to_a_random_share_of_masked_slots(tiny_data, share):
    """Section 3.3: CMLM's corrupted slots, of which a random subset (here ``share``) gets Z.
    Counted over many batches against a binomial bound of 4.5 standard deviations."""
    task, model = build(tiny_data, "hi_cmlm_transformer_tiny", "--train-copy-share", str(share))
    sample = a_batch(task)
    unk = task.tgt_dict.unk()
    n_masked = n_z = 0
    for seed in range(40):
        x_in, emb, z, prev, out = _training_inputs(model, task, sample, seed)
        masked = prev.eq(unk)
        assert torch.equal(
            out["word_ins"]["mask"], masked
        )  # the loss covers CMLM's corrupted slots
        is_z = (x_in - z).abs().amax(-1) < 1e-5
        is_m = (x_in - emb).abs().amax(-1) < 1e-5
        assert (is_z | is_m)[prev.ne(task.tgt_dict.pad())].all()  # every slot is X or Z, none a mix
        assert not (is_z & ~is_m & ~masked).any()  # observed tokens keep their embedding
        n_masked += int(masked.sum())
        n_z += int((is_z & ~is_m & masked).sum())
    got = n_z / n_masked
    assert abs(got - share) < 4.5 * (share * (1 - share) / n_masked) ** 0.5, (got, share, n_masked)


def test_every_strategy_trains_the_same_way(tiny_data):
    """The strategy is a decoding choice: the paper's training loss is the same for all."""
    outs = []
    for strategy in ("all_mask", "all_copied", "weighted_sum", "fence_replace"):
        task, model = build(
            tiny_data, "hi_cmlm_transformer_tiny", "--hybrid-strategy", strategy, seed=2
        )
        outs.append(_training_inputs(model, task, a_batch(task), seed=9)[-1]["word_ins"]["out"])
    assert all(torch.equal(o, outs[0]) for o in outs)


def test_decoding_rule_ablation_trains_with_the_decoding_input(tiny_data):
    task, model = build(
        tiny_data, "hi_cmlm_transformer_tiny", "--train-decoder-input", "decoding_rule"
    )
    sample = a_batch(task)
    x_in, emb, z, prev, _ = _training_inputs(model, task, sample, seed=3)
    w = source_copy_weight(prev.eq(task.tgt_dict.unk()), "fence_replace", 0.6, "mask").unsqueeze(-1)
    assert torch.allclose(x_in, (1 - w) * emb + w * z, atol=1e-5)


def test_all_mask_decoding_of_a_copy_trained_model_uses_no_z(tiny_data, monkeypatch):
    """HI-CMLM + All Mask: trained with copies, decoded as CMLM decodes (no soft copy at all)."""
    task, cmlm = build(tiny_data, "cmlm_transformer")
    _, hybrid = build(
        tiny_data, "hi_cmlm_transformer_tiny", "--hybrid-strategy", "all_mask", seed=1
    )
    assert hybrid.train_copy_share == 0.5 and hybrid.trains_with_copy
    hybrid.load_state_dict(cmlm.state_dict())
    sample = a_batch(task)
    monkeypatch.setattr(
        type(hybrid.decoder),
        "forward_copying_source",
        lambda *a, **k: pytest.fail("all_mask decoding computed Z"),
    )
    gen = IterativeRefinementGenerator(
        task.tgt_dict, max_iter=4, beam_size=2, retain_history=True, adaptive=False
    )
    for a, b in zip(gen.generate([hybrid], sample), gen.generate([cmlm], sample)):
        assert torch.equal(a[0]["tokens"], b[0]["tokens"])
        assert torch.equal(a[0]["positional_scores"], b[0]["positional_scores"])


def test_copy_gradient_reaches_source_embeddings(tiny_data):
    task, model = build(
        tiny_data,
        "hi_cmlm_transformer_tiny",
        "--hybrid-strategy",
        "all_copied",
        "--no-scale-embedding",
    )
    sample = a_batch(task, n=4)
    prev = task.inject_noise(sample["target"])
    net = sample["net_input"]
    out = model(net["src_tokens"], net["src_lengths"], prev, sample["target"])
    out["word_ins"]["out"].logsumexp(-1).sum().backward()
    src_only = set(net["src_tokens"].unique().tolist()) - set(sample["target"].unique().tolist())
    grad = model.encoder.embed_tokens.weight.grad
    assert any(grad[t].abs().sum() > 0 for t in src_only)


def source_lengths(length_out, encoder_out=None, **unused):
    """A length prediction for random models (whose own predicts 2 tokens, nothing to decode):
    each target as long as its source."""
    masks = encoder_out["encoder_padding_mask"]
    return (~masks[0]).sum(1) if masks else torch.full_like(length_out[:, 0], length_out.size(1))


def _random_model_batch(tiny_data, strategy):
    task, model = build(
        tiny_data, "hi_cmlm_transformer_tiny", "--hybrid-strategy", strategy, seed=3
    )
    model.decoder.forward_length_prediction = source_lengths
    return task, model, a_batch(task)


@pytest.mark.parametrize("beam", [1, 3])
@pytest.mark.parametrize("strategy", ["all_mask", "fence_replace"])
def test_mask_predict_matches_fairseq_generator_on_cpu(tiny_data, beam, strategy):
    task, model, sample = _random_model_batch(tiny_data, strategy)
    kwargs = dict(max_iter=4, beam_size=beam, retain_history=True, adaptive=False)
    ours = task.build_generator(
        [model],
        argparse_namespace(
            iter_decode_max_iter=4,
            iter_decode_with_beam=beam,
            retain_iter_history=True,
            iter_decode_force_max_iter=True,
        ),
    )
    ref = IterativeRefinementGenerator(task.tgt_dict, **kwargs)
    a = ours.generate([model], sample)
    b = ref.generate([model], sample)
    assert len(a) == len(b) == sample["target"].size(0)
    for ha, hb in zip(a, b):
        assert torch.equal(ha[0]["tokens"], hb[0]["tokens"])
        assert torch.allclose(ha[0]["positional_scores"], hb[0]["positional_scores"])
        assert ha[0]["steps"] == hb[0]["steps"] == 4
        assert [h["tokens"].tolist() for h in ha[0]["history"]] == [
            h["tokens"].tolist() for h in hb[0]["history"]
        ]
        assert (
            len(ha[0]["history"]) == 2 * 5 - 1 + 1
        )  # initial + (predict, re-mask) x 4 + final predict


# the lean loop without and with history, and cmlm_hybrid's fairseq-generator path
PATHS = [(True, False), (True, True), (False, True)]


@pytest.mark.parametrize("lean,history", PATHS)
def test_mask_predict_adaptive_stop_matches_fairseq_without_its_masks(tiny_data, lean, history):
    """Adaptive stop: where fairseq's hypothesis is complete, ours is the same; ours never
    stops early with a masked slot (CMLM's mask symbol is <unk>, which the last pass of a random
    model may also predict as a word)."""
    task, model, sample = _random_model_batch(tiny_data, "fence_replace")
    ours = task.build_generator(
        [model], argparse_namespace(iter_decode_max_iter=9, retain_iter_history=history)
    )
    assert ours.lean
    ours.lean = lean
    ref = IterativeRefinementGenerator(task.tgt_dict, max_iter=9)
    unk = task.tgt_dict.unk()
    for ha, hb in zip(ours.generate([model], sample), ref.generate([model], sample)):
        a, b = ha[0], hb[0]
        assert a["steps"] == 9 or not a["tokens"].eq(unk).any()
        if not b["tokens"].eq(unk).any():
            assert torch.equal(a["tokens"], b["tokens"])
            assert a["steps"] == b["steps"]


def five_tokens(length_out, encoder_out=None, **unused):
    """A length prediction: <s>, 3 slots, </s> for every sentence of whatever (sub-)batch the
    generator decodes."""
    return torch.full((encoder_out["encoder_out"][0].size(1),), 5, dtype=torch.long)


@pytest.mark.parametrize("lean,history", PATHS)
@pytest.mark.parametrize("beam", [1, 2])
def test_adaptive_stop_does_not_finalize_masked_slots(tiny_data, lean, history, beam):
    """A decoder whose prediction ignores its input (zero output projection: every slot gets
    the same token and score) repeats itself from the first pass, while short targets keep
    the same number of re-masked slots for several passes (3 slots, T = 10: 2, 2, 2, 1, ...).
    fairseq's adaptive stop then finalizes the re-masked tokens; ours decodes on."""
    task, model, sample = _random_model_batch(tiny_data, "fence_replace")
    with torch.no_grad():
        model.decoder.output_projection.weight.zero_()
    model.decoder.forward_length_prediction = five_tokens
    unk = task.tgt_dict.unk()
    ref = IterativeRefinementGenerator(task.tgt_dict, max_iter=9, beam_size=beam)
    ref = ref.generate([model], sample)
    ours = task.build_generator(
        [model],
        argparse_namespace(
            iter_decode_max_iter=9, iter_decode_with_beam=beam, retain_iter_history=history
        ),
    )
    assert ours.lean
    ours.lean = lean
    if beam == 1:
        assert all(h[0]["tokens"].eq(unk).sum() == 2 and h[0]["steps"] == 1 for h in ref)
    for h in ours.generate([model], sample):
        n = len(h[0]["tokens"])
        assert n == 5 or beam > 1 and n == 4
        assert not h[0]["tokens"].eq(unk).any()
        # 3 (2) slots are re-masked none from the 7th (6th) pass on; the next pass stops
        assert h[0]["steps"] == {5: 7, 4: 6}[n]


def test_generator_refuses_ensembles_and_constraints(tiny_data):
    task, model, sample = _random_model_batch(tiny_data, "fence_replace")
    gen = task.build_generator([model], argparse_namespace())
    with pytest.raises(FairseqExtError, match="one model"):
        gen.generate([model, model], sample)
    with pytest.raises(FairseqExtError, match="constraints"):
        gen.generate([model], sample, constraints=torch.zeros(1))


def test_fairseqs_cmlm_decodes_with_fairseqs_generator(tiny_data):
    """A ``cmlm_transformer`` checkpoint: fairseq's generator over fairseq's pass, the length beam
    made by the plugin, decodes as fairseq's own generator."""
    task, cmlm = build(tiny_data, "cmlm_transformer")
    cmlm.decoder.forward_length_prediction = source_lengths
    sample = a_batch(task)
    ours = task.build_generator(
        [cmlm],
        argparse_namespace(
            iter_decode_max_iter=4, iter_decode_with_beam=3, iter_decode_force_max_iter=True
        ),
    )
    assert not ours.lean
    ref = IterativeRefinementGenerator(task.tgt_dict, max_iter=4, beam_size=3, adaptive=False)
    for a, b in zip(ours.generate([cmlm], sample), ref.generate([cmlm], sample), strict=True):
        assert torch.equal(a[0]["tokens"], b[0]["tokens"])  # ours in length-sorted sub-batches
        assert torch.allclose(a[0]["positional_scores"], b[0]["positional_scores"], atol=1e-5)


def test_a_decoder_layer_the_lean_loop_does_not_know_decodes_with_fairseqs_generator(tiny_data):
    """``--cross-self-attention`` layers attend to the encoder in their self-attention: fairseq's
    generator decodes them, as fairseq's own does."""
    task, model = build(tiny_data, "hi_cmlm_transformer_tiny", "--cross-self-attention")
    model.decoder.forward_length_prediction = source_lengths
    sample = a_batch(task)
    options = argparse_namespace(
        iter_decode_max_iter=4, iter_decode_with_beam=2, iter_decode_force_max_iter=True
    )
    ours = task.build_generator([model], options)
    assert not ours.lean
    ref = IterativeRefinementGenerator(task.tgt_dict, max_iter=4, beam_size=2, adaptive=False)
    for a, b in zip(ours.generate([model], sample), ref.generate([model], sample), strict=True):
        assert torch.equal(a[0]["tokens"], b[0]["tokens"])  # ours in length-sorted sub-batches
        assert torch.allclose(a[0]["positional_scores"], b[0]["positional_scores"], atol=1e-5)


@pytest.mark.parametrize("lean,history", PATHS)
@pytest.mark.parametrize("part,output", [("encoder", "encoder outputs"), ("decoder", "scores")])
def test_non_finite_outputs_stop_mask_predict(tiny_data, lean, history, part, output):
    task, model, sample = _random_model_batch(tiny_data, "fence_replace")
    with torch.no_grad():
        getattr(model, part).layers[-1].fc2.bias.fill_(float("nan"))
    model.decoder.forward_length_prediction = five_tokens
    gen = task.build_generator([model], argparse_namespace(retain_iter_history=history))
    assert gen.lean
    gen.lean = lean
    with pytest.raises(FairseqExtError, match=rf"sentence ids 16, 8, .* gave non-finite {output}"):
        gen.generate([model], sample)


def argparse_namespace(**kw):
    import argparse

    return argparse.Namespace(**kw)


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--copy-temperature", "0"], "copy-temperature must be > 0"),
        (["--copy-temperature", "-1"], "copy-temperature must be > 0"),
        (["--mask-weight", "1.5"], r"mask-weight must be in \[0, 1\]"),
        (["--mask-weight", "-0.1"], r"mask-weight must be in \[0, 1\]"),
        (["--decoder-embed-dim", "48", "--no-scale-embedding"], "must equal --decoder-embed-dim"),
        (
            ["--hybrid-strategy", "all_mask", "--decoder-embed-dim", "48"],
            "must equal --decoder-embed-dim",
        ),
        (["--train-copy-share", "1.5"], r"train-copy-share must be in \[0, 1\]"),
    ],
)
def test_bad_model_options_are_refused(tiny_data, extra, match):
    with pytest.raises(FairseqExtError, match=match):
        build(tiny_data, "hi_cmlm_transformer_tiny", *extra)


def test_max_positions_respects_the_length_predictor(tiny_data):
    _, model = build(tiny_data)
    assert model.max_positions()[1] == 255


@pytest.mark.parametrize("n", [1, 7, 8, 9, 21])
def test_complete_batches_cover_every_index(tiny_data, n):
    task, _ = build(tiny_data)
    task.load_dataset("test")
    ds = task.dataset("test")
    indices = np.arange(min(n, len(ds)))
    stock = ds.batch_by_size(indices, max_sentences=4, required_batch_size_multiple=8)
    ours = CompleteBatchesDataset(ds).batch_by_size(
        indices, max_sentences=4, required_batch_size_multiple=8
    )
    covered = sorted(int(i) for b in ours for i in b)
    assert covered == list(range(len(indices)))
    assert sum(len(b) for b in stock) <= len(indices)
    for b_stock, b_ours in zip(stock, ours):
        assert list(b_stock) == list(b_ours)


def test_init_encoder_and_decoder_from_checkpoint(tiny_data, tiny_checkpoint, tmp_path):
    source = torch.load(str(tiny_checkpoint), map_location="cpu", weights_only=True)["model"]
    _, model = build(
        tiny_data,
        "hi_cmlm_transformer_tiny",
        "--init-encoder-from",
        str(tiny_checkpoint),
        "--init-decoder-from",
        str(tiny_checkpoint),
        seed=7,
    )
    for part in ("encoder", "decoder"):
        for name, value in getattr(model, part).state_dict().items():
            assert torch.equal(value, source[f"{part}.{name}"]), name
    # fairseq's own cmlm_transformer takes the task's options too
    _, cmlm = build(
        tiny_data, "cmlm_transformer", "--init-encoder-from", str(tiny_checkpoint), seed=7
    )
    assert torch.equal(cmlm.encoder.layers[0].fc1.weight, source["encoder.layers.0.fc1.weight"])
    with pytest.raises(FairseqExtError, match="same encoder sizes and dictionary"):
        build(
            tiny_data,
            "hi_cmlm_transformer_tiny",
            "--init-encoder-from",
            str(tiny_checkpoint),
            "--encoder-ffn-embed-dim",
            "48",
        )
    decoder_only = {k: v for k, v in source.items() if not k.startswith("decoder.layers.")}
    torch.save(
        {**torch.load(str(tiny_checkpoint), weights_only=True), "model": decoder_only},
        tmp_path / "x.pt",
    )
    with pytest.raises(FairseqExtError, match="no decoder layers"):
        build(tiny_data, "hi_cmlm_transformer_tiny", "--init-decoder-from", str(tmp_path / "x.pt"))


def test_task_iterator_yields_every_validation_example(tiny_data):
    task, _ = build(tiny_data)
    task.load_dataset("valid")
    ds = task.dataset("valid")
    itr = task.get_batch_iterator(
        ds, max_sentences=16, required_batch_size_multiple=8
    ).next_epoch_itr(shuffle=False)
    ids = sorted(int(i) for batch in itr for i in batch["id"])
    assert ids == list(range(len(ds))) and len(ds) == 37


def test_deep_shallow_architecture_has_six_encoder_layers_under_one_decoder_layer(tiny_data):
    """Kasai et al. 2021's layout at the tiny width, and mask-predict still equals fairseq's
    generator on it."""
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(
        parser,
        [
            str(tiny_data),
            "--user-dir",
            USER_DIR,
            "--task",
            "cmlm_hybrid",
            "-s",
            "en",
            "-t",
            "de",
            "--arch",
            "hi_cmlm_transformer_tiny_deep_shallow",
            "--criterion",
            "nat_loss",
        ],
    )
    assert (
        args.encoder_layers,
        args.decoder_layers,
        args.encoder_embed_dim,
        args.decoder_embed_dim,
        args.encoder_ffn_embed_dim,
        args.encoder_attention_heads,
    ) == (6, 1, 192, 192, 768, 4)
    task = tasks.setup_task(args)
    torch.manual_seed(0)
    model = task.build_model(args).eval()
    assert (len(model.encoder.layers), len(model.decoder.layers)) == (6, 1)
    sample = a_batch(task)
    ours = task.build_generator(
        [model],
        argparse_namespace(
            iter_decode_max_iter=3, iter_decode_with_beam=2, iter_decode_force_max_iter=True
        ),
    )
    ref = IterativeRefinementGenerator(task.tgt_dict, max_iter=3, beam_size=2, adaptive=False)
    for ha, hb in zip(ours.generate([model], sample), ref.generate([model], sample)):
        assert torch.equal(ha[0]["tokens"], hb[0]["tokens"])

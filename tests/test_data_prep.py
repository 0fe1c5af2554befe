"""data_prep helpers: Romanian normalisation, Moses unescaping, SGM extraction, Gigaword-style
English, pair cleaning."""

import gzip
import subprocess
import sys

from data_prep.text import gigaword_style
from tests.conftest import ROOT, cli_env, write_lines

TEXT = [sys.executable, str(ROOT / "data_prep" / "text.py")]
SPM = [sys.executable, str(ROOT / "data_prep" / "spm.py")]


def filt(args, lines):
    out = subprocess.run(
        TEXT + args,
        input="".join(x + "\n" for x in lines),
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.splitlines()


def test_romanian_cedilla_becomes_comma_below_then_diacritics_go():
    line = "\u015fi \u0163ara \u015e\u0162 \u201eciteaz\u0103\u201d \u00eentr-un \u00e2n"
    assert filt(["romanian", "--keep-diacritics"], [line]) == [
        '\u0219i \u021bara \u0218\u021a "citeaz\u0103" \u00eentr-un \u00e2n'
    ]
    assert filt(["romanian"], [line]) == ['si tara ST "citeaza" intr-un an']


def test_unescape_and_sgm():
    assert filt(["unescape"], ["it &apos;s &quot;ok&quot; &amp; fine &#124;"]) == [
        'it \'s "ok" & fine |'
    ]
    sgm = [
        '<srcset setid="x">',
        '<doc docid="1">',
        '<seg id="1"> A &amp; B </seg>',
        "</doc>",
        '<seg id="2">C</seg>',
    ]
    assert filt(["sgm"], sgm) == ["A & B", "C"]


def test_english_lines_follow_gigaword_style_and_drop_wikitext_headings():
    assert gigaword_style(" = Heading = ", True) == []
    assert gigaword_style("Born 1990 @-@ 91 in Paris", True) == ["born ####-## in paris"]
    assert gigaword_style("It &apos;s 3 pm", False) == ["it 's # pm"]
    assert gigaword_style("a b", False) == []
    assert [len(x.split()) for x in gigaword_style(" ".join(["w"] * 250), False)] == [100, 100, 50]


def test_gigaword_style_reads_plain_and_gzipped_files_and_refuses_a_missing_one(tmp_path):
    write_lines(tmp_path / "a.txt", [" = Title = ", "", "The 2 cats sat @-@ down"])
    with gzip.open(tmp_path / "b.txt.gz", "wt", encoding="utf-8") as f:
        f.write("Rome &amp; Paris in 1990\n")
    out = subprocess.run(
        TEXT
        + ["gigaword-style", "--wikitext", str(tmp_path / "a.txt"), str(tmp_path / "b.txt.gz")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.splitlines() == ["the # cats sat-down", "rome & paris in ####"]
    assert filt(["gigaword-style"], ["= kept without --wikitext ="]) == [
        "= kept without --wikitext ="
    ]
    bad = subprocess.run(
        TEXT + ["gigaword-style", str(tmp_path / "none.txt")], capture_output=True, text=True
    )
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].endswith(
        f"cannot read {tmp_path / 'none.txt'}: No such file or directory"
    )


def test_clean_pair_drops_empty_and_long_pairs(tmp_path):
    write_lines(tmp_path / "a.en", ["one", "", "three", "four five six", "   "])
    write_lines(tmp_path / "a.de", ["eins", "zwei", "", "vier fünf sechs", "x"])
    proc = subprocess.run(
        SPM
        + [
            "clean-pair",
            str(tmp_path / "a.en"),
            str(tmp_path / "a.de"),
            str(tmp_path / "o.en"),
            str(tmp_path / "o.de"),
            "--max-words",
            "2",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert (tmp_path / "o.en").read_text().splitlines() == ["one"]
    assert (tmp_path / "o.de").read_text().splitlines() == ["eins"]
    assert "kept 1 pairs, dropped 4" in proc.stderr


def test_gigaword_raw_only_normalises_both_oov_markers_and_stops(tmp_path):
    """--raw-only (the pretrained examples tokenise with the checkpoint's own WordPiece): the
    cleaned pairs with `<unk>` and `UNK` as the one token UNK, an empty pair dropped, no
    sentencepiece model or binary folder."""
    src = tmp_path / "src"
    src.mkdir()
    write_lines(src / "train10k.article.txt", ["a <unk>  b", "", "UNK c <unk>"])
    write_lines(src / "train10k.title.txt", ["t1", "t2", "t3"])
    write_lines(src / "valid1k.article.txt", ["v <unk>"])
    write_lines(src / "valid1k.title.txt", ["<unk> w"])
    proc = subprocess.run(
        [
            "bash",
            str(ROOT / "data_prep" / "gigaword.sh"),
            "--local",
            str(src),
            "--out",
            str(tmp_path / "out"),
            "--raw-only",
        ],
        capture_output=True,
        text=True,
        env=cli_env(),
    )
    assert proc.returncode == 0, proc.stderr
    raw = tmp_path / "out" / "raw"
    assert (raw / "train.article").read_text().splitlines() == ["a UNK b", "UNK c UNK"]
    assert (raw / "train.title").read_text().splitlines() == ["t1", "t3"]
    assert (raw / "valid.title").read_text().splitlines() == ["UNK w"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["raw"]


def test_wikitext2_raw_only_splits_one_file_by_article(tmp_path):
    lines = []
    for i in range(10):
        lines += ["", f" = Article {i} = ", "", f" text of article {i} .", ""]
    write_lines(tmp_path / "wiki.valid.raw", lines)
    proc = subprocess.run(
        [
            "bash",
            str(ROOT / "data_prep" / "wikitext2.sh"),
            "--local",
            str(tmp_path / "wiki.valid.raw"),
            "--out",
            str(tmp_path / "out"),
            "--raw-only",
        ],
        capture_output=True,
        text=True,
        env=cli_env(),
    )
    assert proc.returncode == 0, proc.stderr
    raw = tmp_path / "out" / "raw"
    assert (raw / "valid.txt").read_text().splitlines() == [
        " = Article 9 = ",
        " text of article 9 .",
    ]
    assert len((raw / "train.txt").read_text().splitlines()) == 18
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["raw"]

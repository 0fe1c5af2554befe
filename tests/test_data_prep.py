"""data_prep helpers: Romanian normalisation, Moses unescaping, SGM extraction, pair cleaning."""
import subprocess
import sys

from tests.conftest import ROOT, write_lines

TEXT = [sys.executable, str(ROOT / "data_prep" / "text.py")]
SPM = [sys.executable, str(ROOT / "data_prep" / "spm.py")]


def filt(args, lines):
    out = subprocess.run(TEXT + args, input="".join(x + "\n" for x in lines), capture_output=True, text=True,
                         check=True)
    return out.stdout.splitlines()


def test_romanian_cedilla_becomes_comma_below_then_diacritics_go():
    line = "\u015fi \u0163ara \u015e\u0162 \u201eciteaz\u0103\u201d \u00eentr-un \u00e2n"
    assert filt(["romanian", "--keep-diacritics"], [line]) == ['\u0219i \u021bara \u0218\u021a "citeaz\u0103" \u00eentr-un \u00e2n']
    assert filt(["romanian"], [line]) == ['si tara ST "citeaza" intr-un an']


def test_unescape_and_sgm():
    assert filt(["unescape"], ["it &apos;s &quot;ok&quot; &amp; fine &#124;"]) == ["it 's \"ok\" & fine |"]
    sgm = ['<srcset setid="x">', '<doc docid="1">', '<seg id="1"> A &amp; B </seg>', "</doc>", '<seg id="2">C</seg>']
    assert filt(["sgm"], sgm) == ["A & B", "C"]


def test_clean_pair_drops_empty_and_long_pairs(tmp_path):
    write_lines(tmp_path / "a.en", ["one", "", "three", "four five six", "   "])
    write_lines(tmp_path / "a.de", ["eins", "zwei", "", "vier fünf sechs", "x"])
    proc = subprocess.run(SPM + ["clean-pair", str(tmp_path / "a.en"), str(tmp_path / "a.de"),
                                 str(tmp_path / "o.en"), str(tmp_path / "o.de"), "--max-words", "2"],
                          capture_output=True, text=True, check=True)
    assert (tmp_path / "o.en").read_text().splitlines() == ["one"]
    assert (tmp_path / "o.de").read_text().splitlines() == ["eins"]
    assert "kept 1 pairs, dropped 4" in proc.stderr

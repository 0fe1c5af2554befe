"""Tokenized BLEU (``fairseq_ext.analysis.tokenized_bleu``): Moses tokens and German compound
splitting as the published WMT14 En-De scores have them, and the score against fairseq's own
BLEU scorer (its C implementation, independent of sacreBLEU) and a hand-computed case."""

import json
import math
import sys

import pytest

from tests.conftest import run, write_lines

pytest.importorskip("sacremoses")

from fairseq_ext.analysis.tokenized_bleu import compound_split, tokenize, tokenized_bleu  # noqa: E402

REFS = [
    'Die Rich-Text-Formate sind "gut", sagte er.',
    "Das Nicht-EU-Land zahlte 3,5 Mio. Euro.",
    "Wir sehen uns am Montag-Abend wieder!",
]
HYPS = [
    'Die Rich-Text-Formate sind "schlecht", sagte er.',
    "Das Nicht-EU-Land zahlte 3,5 Millionen Euro.",
    "Wir sehen uns am Montag wieder!",
]


def fairseq_bleu(hypotheses: list[str], references: list[str]) -> float:
    """fairseq's Scorer (fairseq_cli/score.py's) on whitespace tokens."""
    from fairseq.data import Dictionary
    from fairseq.scoring import bleu

    d = Dictionary()
    scorer = bleu.Scorer(bleu.BleuConfig(pad=d.pad(), eos=d.eos(), unk=d.unk()))
    for hyp, ref in zip(hypotheses, references):
        scorer.add(
            d.encode_line(ref, add_if_not_exist=True), d.encode_line(hyp, add_if_not_exist=True)
        )
    return scorer.score()


def test_moses_tokens_and_compound_split():
    """tokenizer.perl -l de's tokens (punctuation apart, quotes escaped, "Mio." kept as a
        German abbreviation) and the ##AT## split, whose matches do not overlap (perl's s///g: the
    expected strings are perl's output on the same tokens)."""
    assert tokenize(REFS, "de") == [
        "Die Rich ##AT##-##AT## Text ##AT##-##AT## Formate sind &quot; gut &quot; , sagte er .",
        "Das Nicht ##AT##-##AT## EU ##AT##-##AT## Land zahlte 3,5 Mio. Euro .",
        "Wir sehen uns am Montag ##AT##-##AT## Abend wieder !",
    ]
    assert compound_split("rich-text format - x a-b-c") == (
        "rich ##AT##-##AT## text format - x a ##AT##-##AT## b-c"
    )
    assert tokenize(["Ein Test-Fall."], "en") == ["Ein Test-Fall ."]


def test_score_equals_fairseq_scorer_and_hand_count():
    """The score equals fairseq's BLEU on the same tokens; a one-sentence case counted by hand:
    n-gram precisions 5/6, 3/5, 2/4, 1/3, no brevity penalty."""
    result = tokenized_bleu(HYPS, REFS, "de")
    tokens = tokenize(HYPS, "de"), tokenize(REFS, "de")
    assert result["score"] == pytest.approx(fairseq_bleu(*tokens), abs=0.005)
    assert 0 < result["score"] < 100
    assert result["signature"].startswith("moses:de|compound-split:yes|")
    assert "tok:none" in result["signature"]
    one = tokenized_bleu(["the cat sat on a mat"], ["the cat sat on the mat"], "en")
    expected = 100 * math.exp(sum(map(math.log, (5 / 6, 3 / 5, 2 / 4, 1 / 3))) / 4)
    assert one["score"] == round(expected, 2) == 53.73
    assert tokenized_bleu(REFS, REFS, "de")["score"] == 100.0


def test_command_adds_the_score_to_bleu_json(tmp_path):
    """What examples/hi_cmlm/run.sh runs: sacrebleu -m bleu writes bleu.json, the command adds
    "tokenized" to it and keeps sacreBLEU's fields; mismatched line counts are one line."""
    write_lines(tmp_path / "ref.txt", REFS)
    write_lines(tmp_path / "hyp.txt", HYPS)
    bleu = tmp_path / "bleu.json"
    bleu.write_text(
        run(["sacrebleu", tmp_path / "ref.txt", "-i", tmp_path / "hyp.txt", "-m", "bleu"]).stdout
    )
    sacre = json.loads(bleu.read_text())
    command = [sys.executable, "-m", "fairseq_ext.analysis.tokenized_bleu"]
    run([*command, tmp_path / "ref.txt", tmp_path / "hyp.txt", "--lang", "de", "--into", bleu])
    scores = json.loads(bleu.read_text())
    assert scores["tokenized"] == tokenized_bleu(HYPS, REFS, "de")
    assert {k: scores[k] for k in sacre} == sacre
    write_lines(tmp_path / "short.txt", HYPS[:2])
    proc = run(
        [*command, tmp_path / "ref.txt", tmp_path / "short.txt", "--lang", "de"], check=False
    )
    assert proc.returncode == 1 and proc.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'short.txt'}: 2 hypotheses for 3 references in {tmp_path / 'ref.txt'}"
    ]

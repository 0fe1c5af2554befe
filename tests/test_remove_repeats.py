"""Removal of consecutive repeats after mask-predict (``--remove-repeats N``, ``remove_repeats``;
docs/results/hi-cmlm.md): it removes exactly the consecutive duplicates (N = 1, against
itertools.groupby on random sequences) and the repeated spans of up to N tokens (against a
rewrite of the sequence by regular expressions), fairseq-generate and the Python API agree, a
per-call choice holds for its thread alone, and the hub's and ``make quickstart``'s defaults (with
the length rule) are the ones ``reproduction/hi_cmlm/remove_repeats.json`` chose on Multi30k val."""

import itertools
import json
import re

import pytest
import torch

from fairseq_ext import hub
from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.generation.repeats import remove_consecutive_repeats
from fairseq_ext.hub.generation import HICMLMHubInterface
from tests.conftest import ROOT, USER_DIR, read_sample, run
from tests.test_hub import MODEL, detokenized, quickstart, quickstart_test_set  # noqa: F401
from tests.test_hub_threads import assert_concurrent_equals_sequential

RESULTS = ROOT / "reproduction" / "hi_cmlm" / "remove_repeats.json"


def repeating(texts: list[str]) -> int:
    """How many of ``texts`` hold a word twice in a row (the results file's measure)."""
    return sum(
        any(a == b for a, b in zip(w, w[1:]))
        for w in (re.findall(r"\w+", t.lower()) for t in texts)
    )


def test_removes_exactly_the_consecutive_duplicates():
    generator = torch.Generator().manual_seed(0)
    for _ in range(300):
        n = int(torch.randint(1, 30, (1,), generator=generator))
        tokens = torch.randint(4, 8, (n,), generator=generator)  # few ids: many repeats
        scores = torch.randn(n, generator=generator)
        hypo = {"tokens": tokens, "positional_scores": scores, "score": scores.mean(), "steps": 9}
        out = remove_consecutive_repeats(hypo)
        firsts, i = [], 0
        for _, run_ in itertools.groupby(tokens.tolist()):
            firsts.append(i)
            i += len(list(run_))
        assert out["tokens"].tolist() == [k for k, _ in itertools.groupby(tokens.tolist())]
        assert out["positional_scores"].tolist() == scores[firsts].tolist()
        assert out["score"] is hypo["score"] and out["steps"] == 9
        assert hypo["tokens"] is tokens and len(tokens) == n  # the input is left as it was


def spans_removed(tokens: list[int], span: int) -> list[int]:
    """An independent reference: the sequence as text, one character a token, rewritten left to
    right, each prefix's repeated tail span (shortest first) cut with a regular expression."""
    text = ""
    for token in tokens:
        text += chr(ord("a") + token)
        while True:
            for n in range(1, span + 1):
                if re.search(rf"(.{{{n}}})\1$", text):
                    text = text[:-n]
                    break
            else:
                break
    return [ord(c) - ord("a") for c in text]


def test_removes_exactly_the_repeated_spans_of_up_to_n_tokens():
    generator = torch.Generator().manual_seed(1)
    for span in (2, 3):
        for _ in range(300):
            n = int(torch.randint(1, 30, (1,), generator=generator))
            tokens = torch.randint(0, 3, (n,), generator=generator)
            scores = torch.randn(n, generator=generator)
            out = remove_consecutive_repeats(
                {"tokens": tokens, "positional_scores": scores, "score": 0.0}, span
            )
            assert out["tokens"].tolist() == spans_removed(tokens.tolist(), span)
            kept = out["tokens"].tolist()
            assert not any(
                kept[i : i + k] == kept[i + k : i + 2 * k]
                for k in range(1, span + 1)
                for i in range(len(kept) - 2 * k + 1)
            )
            # the kept scores are those of kept positions, in order
            positions = [scores.tolist().index(x) for x in out["positional_scores"].tolist()]
            assert positions == sorted(positions)
            assert [tokens[i].item() for i in positions] == kept


def test_fairseq_generate_and_the_api_remove_the_same_repeats(quickstart, quickstart_test_set):
    """``--remove-repeats 2`` and ``remove_repeats=2`` give the same outputs, which differ from
    the outputs without it where those repeat a word, and repeat fewer words."""
    src, data = quickstart_test_set
    cli = [
        "fairseq-generate",
        data,
        "--user-dir",
        USER_DIR,
        "--task",
        "cmlm_hybrid",
        "-s",
        "en",
        "-t",
        "de",
        "--path",
        MODEL / "checkpoint.pt",
        "--gen-subset",
        "test",
        "--batch-size",
        "16",
        "--iter-decode-max-iter",
        "9",
        "--iter-decode-with-beam",
        "3",
        "--length-offset",
        "2",
        "--post-process",
        "sentencepiece",
    ]
    removed = detokenized(run([*cli, "--remove-repeats", "2"]).stdout)
    kept = detokenized(run(cli).stdout)
    offset = {"length_offset": 2, "length_offset_ramp": 0}  # as the command's
    assert quickstart.translate(src, remove_repeats=2, **offset) == removed
    assert quickstart.translate(src, remove_repeats=0, **offset) == kept
    assert repeating(removed) < repeating(kept)
    assert (
        quickstart.task.cfg.remove_repeats == HICMLMHubInterface.DEFAULT_DECODING["remove_repeats"]
    )  # the calls changed nothing


def test_a_per_call_choice_holds_for_its_thread_alone(quickstart):
    sources = read_sample("test", "en", 40)
    calls = [
        lambda: quickstart.translate(sources[:20], length_offset=2, remove_repeats=2),
        lambda: quickstart.translate(sources[:20], length_offset=2, remove_repeats=0),
        lambda: quickstart.translate(sources[20:], passes=4, remove_repeats=0),
        lambda: quickstart.translate(sources[20:], passes=4, remove_repeats=2),
    ]
    on, off = calls[0](), calls[1]()
    assert on != off and repeating(on) < repeating(off)
    assert_concurrent_equals_sequential(calls)
    loaded = hub.from_pretrained(MODEL, length_offset=2, remove_repeats=0)
    assert loaded.translate(sources[:20]) == off
    assert loaded.translate(sources[:20], remove_repeats=2) == on


def test_a_value_that_is_not_a_bool_is_one_error(quickstart):
    with pytest.raises(
        TypeError, match=r"translate: remove_repeats must be an integer in \[0, 8\]"
    ):
        quickstart.translate("A dog runs.", remove_repeats=True)
    with pytest.raises(FairseqExtError, match=r"remove_repeats must be in \[0, 8\], got 9"):
        quickstart.translate("A dog runs.", remove_repeats=9)
    with pytest.raises(TypeError, match="from_pretrained: remove_repeats must be an integer"):
        hub.from_pretrained(MODEL, remove_repeats="2")


def test_the_defaults_are_those_chosen_on_validation(quickstart):
    """The hub's defaults and ``make quickstart``'s decoding flags are the setting the results
    file chose: the best val BLEU at the hub's passes and length beam among the settings with at
    most 3 in 100 outputs repeating a word, no lower than offset 2 without removal and no short
    input lengthened (a constant offset lengthens them: the previous default 3 did)."""
    result = json.loads(RESULTS.read_text(encoding="utf-8"))
    chosen = result["chosen"]
    passes = quickstart.cfg.generation.iter_decode_max_iter + 1
    beam = quickstart.cfg.generation.iter_decode_with_beam
    assert (chosen["passes"], chosen["length_beam"]) == (passes, beam)
    here = [
        r
        for r in result["rows"]
        if (r["passes"], r["length_beam"]) == (passes, beam) and r["remove_repeats"] != "words"
    ]
    names = ("length_offset", "length_offset_ramp", "remove_repeats")
    offset_2 = next(r for r in here if tuple(r[k] for k in names) == (2, 0, 0))
    fit = [
        r
        for r in here
        if r["repeated_share"] <= 0.03
        and r["bleu"] >= offset_2["bleu"]
        and r["short_lengthened"] == 0
    ]
    assert chosen == max(fit, key=lambda r: r["bleu"])
    offset_3 = next(r for r in here if tuple(r[k] for k in names) == (3, 0, 3))
    assert offset_3["short_lengthened"] > 0 and chosen["repeated_share"] <= 0.03
    defaults = {k: chosen[k] for k in names}
    assert HICMLMHubInterface.DEFAULT_DECODING == defaults
    assert {k: getattr(quickstart.task.cfg, k) for k in names} == defaults
    assert quickstart.models[0].decoder.length_offset_ramp == defaults["length_offset_ramp"]
    script = (ROOT / "examples" / "quickstart" / "run.sh").read_text(encoding="utf-8")
    flags = " ".join(f"--{k.replace('_', '-')} {chosen[k]}" for k in names)
    assert f"--iter-decode-max-iter {passes - 1} --iter-decode-with-beam {beam}" in script
    assert flags in script


def test_the_defaults_repeat_few_words_on_the_test_sample(quickstart):
    """On the sample's first 100 test sentences (the references repeat no word), the defaults
    repeat a word in at most 3 outputs, where offset 2 without removal repeats in many more."""
    src = read_sample("test", "en", 100)
    assert repeating(read_sample("test", "de", 100)) == 0
    default = repeating(quickstart.translate(src))
    plain = repeating(quickstart.translate(src, length_offset=2, remove_repeats=0))
    assert default <= 3 < plain, (default, plain)

"""The mask-predict decoding rows of ``make bench`` (issue 41): every row of the grid with its
keys, each decoding timed once per round for all the rows that read it, BLEU as sacreBLEU
scores the detokenized outputs, the refusal to publish under load and its ``--allow-load``
override, the generated block of docs/results/speed.md and the speed-up figure."""

import itertools
import json

import pytest
import sacrebleu
import torch
from fairseq.data import Dictionary

from fairseq_ext.common.errors import FairseqExtError
from reproduction.benchmarks import common, hicmlm, own_inputs, run
from reproduction.benchmarks.plot import plot_maskpredict_speedup

ROW_KEYS = {
    "batch",
    "sentences",
    "passes",
    "length_beam",
    "teacher_beam",
    "student_sentences_per_s",
    "student_tokens_per_s",
    "teacher_sentences_per_s",
    "teacher_tokens_per_s",
    "speedup",
    "student_bleu",
    "teacher_bleu",
    "teacher_input",
    "load_before",
    "load_after",
    "note",
}
TINY = hicmlm.Grid(((1, 2), (2, 4)), (1, 4), (1, 3), (1, 5))


def test_decode_rows_cover_the_grid_and_share_each_decoding(monkeypatch):
    timed = []
    real = common.interleaved_medians

    def one_round(fns, reps, device, warmup=1):
        timed.append(sorted(fns))
        return real(fns, 1, device, 0)

    loads = iter([0.1, 0.2, 4.0, 4.1])  # batch 1 quiet, batch 2 not
    monkeypatch.setattr(common, "timed", lambda fn, device: (fn(), 1.0)[1])
    monkeypatch.setattr(common, "interleaved_medians", one_round)
    monkeypatch.setattr(common, "load_average", lambda: next(loads))
    monkeypatch.setattr(common, "own_threads", lambda device: 2)
    monkeypatch.setattr(hicmlm, "QUICK_DECODE", TINY)
    metrics, rows, _ = hicmlm.decode_speed("cpu", quick=True)

    assert all(set(row) == ROW_KEYS for row in rows)
    assert [(r["batch"], r["passes"], r["length_beam"], r["teacher_beam"]) for r in rows] == [
        (b, *c) for b in (1, 2) for c in itertools.product((1, 4), (1, 3), (1, 5))
    ]
    # per batch size one interleaved timing of 4 student and 2 teacher decodings, for 8 rows
    assert (
        timed
        == [
            sorted(
                [("student", T, lb) for T in (1, 4) for lb in (1, 3)]
                + [("teacher", 1), ("teacher", 5)]
            )
        ]
        * 2
    )
    assert all(r["speedup"] == 1.0 and r["student_sentences_per_s"] == r["sentences"] for r in rows)
    assert all(0 <= r["student_bleu"] <= 100 and r["student_tokens_per_s"] > 0 for r in rows)
    assert {(r["batch"], r["load_before"], r["load_after"], r["note"]) for r in rows} == {
        (1, 0.1, 0.2, ""),
        (2, 4.0, 4.1, "not quiet: above the bench's own 2 threads + 0.5"),
    }
    assert metrics == {"maskpredict_vs_ar_speedup_b1_T4": 1.0, "ar_beam5_sentences_per_s_b1": 2.0}


def test_bleu_is_sacrebleu_of_the_outputs_detokenized_by_the_quickstart_model():
    d = Dictionary.load(str(hicmlm.MODEL_DIR / "dict.txt"))
    sp = own_inputs.sentencepiece()
    references = [
        "Ein Mann fotografiert weiße und gelbe Tulpen.",
        "Zwei Männer sprechen auf einem Markt.",
    ]
    said = ["Ein Mann fotografiert weiße und gelbe Tulpen.", "Zwei Männer reden auf dem Markt."]
    outputs = [
        torch.tensor([d.bos(), *(d.index(p) for p in sp.encode(line, out_type=str)), d.eos()])
        for line in said
    ]
    assert hicmlm.pieces(outputs[0], d) == sp.encode(said[0], out_type=str)  # no <s>, no </s>
    assert hicmlm.bleu(outputs, references, d, sp) == pytest.approx(
        sacrebleu.corpus_bleu(said, [references]).score
    )
    assert hicmlm.bleu(outputs[:1], references[:1], d, sp) == pytest.approx(100.0)


class FakeBenchmark:
    """A benchmark module whose ``run`` returns one ratio at once."""

    calls = 0

    @classmethod
    def run(cls, device, quick):
        cls.calls += 1
        return {"metrics": {"fake_ratio": 1.0}, "details": {}, "hardware": "test CPU"}


@pytest.fixture
def published_into(monkeypatch, tmp_path):
    """``run.main`` publishing into ``tmp_path`` (as into benchmarks/results), with the fake
    benchmark, the page's tables captured instead of written."""
    pages = []
    FakeBenchmark.calls = 0
    monkeypatch.setattr(run, "RESULTS", tmp_path)
    monkeypatch.setattr(run, "benchmark", lambda name: FakeBenchmark)
    monkeypatch.setattr(run, "update_pages", pages.append)
    return pages


def test_run_refuses_to_publish_under_load(monkeypatch, tmp_path, published_into):
    monkeypatch.setattr(common.os, "getloadavg", lambda: (1.3, 1.0, 0.9))
    with pytest.raises(FairseqExtError) as refused:
        run.main(["--only", "hicmlm"])
    assert str(refused.value) == (
        "1-minute load average 1.30 > 0.5 before the bench started: another job shares the "
        "cores and every timing would carry its load; wait until the machine is quiet, or pass "
        "--allow-load to publish anyway (the results file and docs/results/speed.md then say so)"
    )
    assert FakeBenchmark.calls == 0 and not list(tmp_path.iterdir()) and not published_into
    run.main(
        ["--only", "hicmlm", "--quick", "--out", str(tmp_path / "quick")]
    )  # not published: no refusal
    assert FakeBenchmark.calls == 1 and not published_into


def test_allow_load_publishes_and_the_tables_say_so(monkeypatch, tmp_path, published_into):
    monkeypatch.setattr(common.os, "getloadavg", lambda: (1.3, 1.0, 0.9))
    run.main(["--only", "hicmlm", "--allow-load"])
    result = json.loads((tmp_path / "cpu.json").read_text())["benchmarks"]["hicmlm"]
    assert result["allow_load"] is True and result["load_at_start"] == 1.3
    (results,) = published_into
    assert run.render_table(results).splitlines()[-1] == (
        "cpu `hicmlm` was published with `--allow-load`: 1-minute load average 1.30 at the "
        "start, above 0.5 (another job shared the cores)."
    )
    monkeypatch.setattr(common.os, "getloadavg", lambda: (0.2, 1.0, 0.9))
    run.main(["--only", "hicmlm"])
    result = json.loads((tmp_path / "cpu.json").read_text())["benchmarks"]["hicmlm"]
    assert "allow_load" not in result and result["load_at_start"] == 0.2
    assert "--allow-load" not in run.render_table(published_into[-1])


def _row(batch, passes, length_beam=1, teacher_beam=5, speedup=2.0, note=""):
    return {
        "batch": batch,
        "sentences": 128,
        "passes": passes,
        "length_beam": length_beam,
        "teacher_beam": teacher_beam,
        "student_sentences_per_s": 50.0,
        "student_tokens_per_s": 700.0,
        "teacher_sentences_per_s": 25.0,
        "teacher_tokens_per_s": 350.0,
        "speedup": speedup,
        "student_bleu": 29.1,
        "teacher_bleu": 31.5,
        "load_before": 2.1,
        "load_after": 2.2,
        "note": note,
    }


def _results(rows, **extra):
    hicmlm_out = {
        "metrics": {},
        "details": {"student_sha256": "ab" * 32, "decode_rows": rows},
        "hardware": "test CPU, 2 threads",
        **extra,
    }
    return {
        "cpu": {
            "hardware": "test CPU, 2 threads",
            "date": "2026-12-01",
            "benchmarks": {"hicmlm": hicmlm_out},
        }
    }


ROWS = [
    _row(b, T, speedup=s)
    for T, speeds in ((4, (3.0, 2.5, 2.0, 1.8)), (10, (1.5, 1.2, 0.9, 0.8)))
    for b, s in zip((1, 8, 64, 256), speeds)
] + [_row(64, 10, length_beam=3, teacher_beam=1, note="not quiet")]


def test_rows_block_says_how_to_measure_them_until_they_are():
    line = (
        "The rows have not been measured yet: `python -m reproduction.benchmarks.run --only "
        "hicmlm` on a quiet machine measures them.\n"
    )
    assert run.render_rows({}) == line
    assert run.render_rows(_results([])) == line


def test_rows_block_is_a_table_of_the_rows_with_the_figure():
    lines = run.render_rows(_results(ROWS, load_at_start=1.3, allow_load=True)).splitlines()
    assert lines[0] == (
        "CPU, test CPU, 2 threads, 1-minute load average 1.30 at the start; "
        f"student SHA-256 `{'ab' * 32}`."
    )
    assert lines[2].startswith("| batch | passes | length beam | teacher beam | speed-up |")
    table = [line for line in lines if line.startswith("| ")][1:]
    assert len(table) == len(ROWS)
    assert (
        table[-1]
        == "| 64 | 10 | 3 | 1 | 2.00 | 50.0 | 25.0 | 700 | 350 | 29.10 | 31.50 | 2.10 | 2.20 | "
        "not quiet |"
    )
    assert "cpu `hicmlm` was published with `--allow-load`" in lines[-3]
    assert lines[-1] == (
        "![Mask-predict speed-up against batch size]"
        "(../../reproduction/benchmarks/results/maskpredict_speedup.png)"
    )


def test_speedup_figure_is_drawn_from_the_rows(tmp_path):
    assert plot_maskpredict_speedup(_results(ROWS), tmp_path / "maskpredict_speedup.png")
    assert (tmp_path / "maskpredict_speedup.png").stat().st_size > 5000
    assert not plot_maskpredict_speedup(_results([]), tmp_path / "none.png")
    assert not plot_maskpredict_speedup(
        _results([_row(8, 4, length_beam=3)]), tmp_path / "none.png"
    )
    assert not (tmp_path / "none.png").exists()


def test_rows_block_says_which_speedup_goals_the_run_met():
    from reproduction.benchmarks.hicmlm import GOALS

    metrics = {
        "maskpredict_vs_ar_speedup_b1_T4": 3.2,
        "maskpredict_vs_ar_speedup_b1_T10": 1.99,
        "maskpredict_vs_ar_speedup_b64_T10": 1.5,
        "hicmlm_train_tokens_per_s_ratio": 0.9,
    }
    results = _results(ROWS, goals=GOALS)
    results["cpu"]["benchmarks"]["hicmlm"]["metrics"] = metrics
    results["cpu"]["benchmarks"]["hicmlm"]["details"]["student_layout"] = "3+1 x 192"
    lines = run.render_rows(results).splitlines()
    assert lines[0].endswith(f"; student 3+1 x 192, SHA-256 `{'ab' * 32}`.")
    assert lines[-3] == (
        "Goals (length beam 1 over the teacher's beam 5): batch 1 with 4 passes 3.20x (goal >= "
        "3: met); batch 1 with 10 passes 1.99x (goal >= 2: not met); batch 64 with 10 passes "
        "1.50x (goal >= 1.5: met)."
    )
    assert not any(
        line.startswith("Goals") for line in run.render_rows(_results(ROWS)).splitlines()
    )

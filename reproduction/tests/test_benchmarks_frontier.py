"""The decoding bench against the deployed engine (issue 76, ``benchmarks/frontier.py``): each
model decodes the input its own task binarises, so that the bench's outputs are what
``fairseq-generate`` prints on ``fairseq-preprocess`` data (the teacher without ``<s>``, the
student with it); CTranslate2's conversion of the teacher decodes what fairseq's beam search
does; the goals read the rows as issue 76 states them; the figure draws every row; each row's
FLOPs are counted by the shapes of its products (CTranslate2's are fairseq's of the same beam) and
the cost line derives from them the decoder runs a student could afford."""

import functools
import json
from pathlib import Path

import pytest
import torch

from reproduction.benchmarks import frontier, own_inputs, run
from reproduction.tests.conftest import fork_commands_of
from tests.conftest import ROOT
from tests.conftest import run as run_command

pytestmark = pytest.mark.cli
N = 12


@pytest.fixture(autouse=True)
def _forked_commands(monkeypatch):
    fork_commands_of(monkeypatch, own_inputs)  # the benches' fairseq-preprocess


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    with pytest.MonkeyPatch.context() as monkeypatch:
        fork_commands_of(monkeypatch, own_inputs)
        return own_inputs.binarise_sample(N, tmp_path_factory.mktemp("frontier"))


@functools.cache  # the teacher's beam 5 is compared at two batch sizes: one command
def _generate(data: Path, checkpoint: Path, *options: str) -> list[list[str]]:
    """The H lines of ``fairseq-generate`` on ``data``, as pieces in line order (the command forked
    from the tests' server, tests.forked_cli)."""
    proc = run_command(
        [
            "fairseq-generate",
            data,
            "--user-dir",
            ROOT / "fairseq_ext",
            "--path",
            checkpoint,
            "--gen-subset",
            "test",
            "--batch-size",
            "4",
            "--required-batch-size-multiple",
            "1",
            *options,
        ],
        cwd=ROOT,
    )
    hyps = {
        int(line.split("\t")[0][2:]): line.split("\t")[2].split()
        for line in proc.stdout.splitlines()
        if line.startswith("H-")
    }
    return [hyps[i] for i in range(len(hyps))]


def test_each_task_reads_its_own_input_format(data):
    d_src = {}
    for name, path in (
        ("teacher", frontier.TEACHERS["teacher 3+3"]),
        ("student", frontier.STUDENT),
    ):
        _, task, sources = own_inputs.load(path, data)
        d_src[name] = (task.source_dictionary, sources)
    (td, teacher), (sd, student) = d_src["teacher"], d_src["student"]
    assert all(s[0] != td.bos() and s[-1] == td.eos() for s in teacher)  # translation: pieces </s>
    assert all(
        s[0] == sd.bos() and s[-1] == sd.eos() for s in student
    )  # translation_lev: <s> pieces </s>
    assert [s[1:].tolist() for s in student] == [s.tolist() for s in teacher]


@pytest.mark.parametrize("bsz", [1, 5])
def test_the_teachers_outputs_are_fairseq_generates(data, bsz):
    teacher = frontier.TEACHERS["teacher 3+3"]
    decoders = {
        d.setting: d
        for d in frontier.autoregressive_decoders(
            "teacher 3+3", teacher, data, data.parent, [("fairseq", "float32", 5)]
        )
    }
    d = decoders["float32, beam 5"]
    assert d.decode(d.batches(bsz, N)) == _generate(data, teacher, "--beam", "5")


@pytest.mark.parametrize("offset", [0, 2])
def test_the_students_outputs_are_fairseq_generates(data, offset):
    (d,) = frontier.mask_predict_decoders(data, [(4, 3, offset)])
    assert d.decode(d.batches(5, N)) == _generate(
        data,
        frontier.STUDENT,
        "--task",
        "cmlm_hybrid",
        "--iter-decode-max-iter",
        "3",
        "--iter-decode-with-beam",
        "3",
        "--length-offset",
        str(offset),
    )


def test_ctranslate2_decodes_the_converted_teacher_as_fairseq_does(data):
    decoders = {
        (d.engine.split()[0], d.setting): d
        for d in frontier.autoregressive_decoders(
            "teacher 3+3",
            frontier.TEACHERS["teacher 3+3"],
            data,
            data.parent,
            [
                ("fairseq", "float32", 1),
                ("fairseq", "float32", 5),
                ("ctranslate2", "float32", 1),
                ("ctranslate2", "float32", 5),
                ("ctranslate2", "int8", 5),
            ],
        )
    }
    out = {k: d.decode(d.batches(4, N)) for k, d in decoders.items()}
    # greedy search is exact arithmetic on both sides but for float rounding: the same outputs
    assert out[("CTranslate2", "float32, beam 1")] == out[("fairseq", "float32, beam 1")]
    same = sum(
        a == b
        for a, b in zip(
            out[("CTranslate2", "float32, beam 5")], out[("fairseq", "float32, beam 5")]
        )
    )
    assert (
        same >= N - 1
    )  # beam 5: ties may break otherwise (63 of 64 sentences agreed when measured)
    assert (
        out[("CTranslate2", "int8, beam 5")] != out[("fairseq", "float32, beam 1")]
    )  # a beam, not greedy
    # CTranslate2's arithmetic is fairseq's of the same beam: the same count, counted once
    assert (
        decoders[("CTranslate2", "int8, beam 5")].flops
        is decoders[("fairseq", "float32, beam 5")].flops
    )
    assert decoders[("CTranslate2", "float32, beam 1")].flops(4, N) == pytest.approx(
        decoders[("fairseq", "float32, beam 1")].flops(4, N)
    )
    assert (
        decoders[("fairseq", "float32, beam 5")].flops(4, N)
        > 2 * decoders[("fairseq", "float32, beam 1")].flops(4, N)
        > 0
    )


def test_the_flop_counter_counts_float_and_int8_products_by_their_shapes():
    from fairseq_ext.generation.int8 import quantize_for_decoding

    torch.manual_seed(0)
    layer = torch.nn.Sequential(torch.nn.Linear(24, 40)).eval()
    for model in (
        layer,
        quantize_for_decoding(torch.nn.Sequential(torch.nn.Linear(24, 40)).eval()),
    ):
        flops = frontier.flop_counter(
            lambda batches, model=model: [model(b) for b in batches],
            lambda bsz, n: [torch.randn(bsz, 7, 24) for _ in range(0, n, bsz)],
        )
        assert flops(3, 6) == 2 * 7 * 24 * 40  # a sentence: 7 rows of 24 -> 40


def test_int8_mask_predict_counts_the_float_loops_arithmetic(data):
    (plain,) = frontier.mask_predict_decoders(data, [(4, 3, 2)])
    (int8,) = frontier.mask_predict_decoders(data, [(4, 3, 2)], int8=True)
    # the same shapes but for lengths int8 may predict otherwise
    assert int8.flops(5, N) == pytest.approx(plain.flops(5, N), rel=0.05)
    assert plain.flops(5, N) > 1e6


def _row(engine, setting, bsz, speed, bleu, model="teacher 3+3"):
    return {
        "model": model,
        "engine": engine,
        "setting": setting,
        "batch": bsz,
        "sentences_per_s": speed,
        "bleu": bleu,
    }


def test_goals_take_the_fastest_mask_predict_setting_at_no_lower_bleu():
    rows = [
        _row("CTranslate2 4.8.5", "int8, beam 5", 1, 30.0, 33.0),
        _row("fairseq_ext mask-predict", "4 passes, length beam 1", 1, 60.0, 32.9, "student 3+1"),
        _row("fairseq_ext mask-predict", "10 passes, length beam 3", 1, 24.0, 33.0, "student 3+1"),
        _row("CTranslate2 4.8.5", "int8, beam 5", 64, 50.0, 33.0),
        _row("fairseq_ext mask-predict", "4 passes, length beam 1", 64, 90.0, 30.0, "student 3+1"),
    ]
    quality = {
        "teacher 3+3: fairseq, float32, beam 5": 33.8,
        "student 3+1: fairseq_ext mask-predict, 10 passes, length beam 3": 29.7,
    }
    assert frontier.goals(rows, quality) == {
        "maskpredict_over_ct2_int8_beam5_b1": 0.8,
        "maskpredict_over_ct2_int8_beam5_b64": 0.0,
        "student_gap_to_teacher_bleu": 4.1,
    }


def test_frontier_keeps_the_points_no_other_beats_on_both_axes():
    points = [(10.0, 30.0), (20.0, 29.0), (15.0, 28.0), (5.0, 31.0), (20.0, 28.5)]
    assert frontier.pareto_front(points) == [(5.0, 31.0), (10.0, 30.0), (20.0, 29.0)]


def test_quick_run_writes_rows_the_page_and_the_figure(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "BENCHMARKS", ["frontier"])
    run.main(["--only", "frontier", "--quick", "--out", str(tmp_path)])
    result = json.loads((tmp_path / "cpu.json").read_text())["benchmarks"]["frontier"]
    rows = result["details"]["rows"]
    assert {r["batch"] for r in rows} == {1, 64}
    assert {r["engine"].split()[0] for r in rows} >= {"fairseq_ext", "fairseq", "CTranslate2"}
    assert all(0 <= r["bleu"] <= 100 and r["sentences_per_s"] > 0 for r in rows)
    assert all(
        r["mflop_per_sentence"] > 0
        and r["gflop_per_s"]
        == pytest.approx(r["mflop_per_sentence"] * r["sentences_per_s"] / 1000, abs=0.1)
        for r in rows
    )
    assert (tmp_path / "frontier.png").stat().st_size > 10_000
    table = frontier.render(result)
    assert all(f"| {r['setting']} |" in table for r in rows)
    assert "| MFLOP/sentence | GFLOP/s |" in table
    assert f"(int8 packed for torch's `{result['details']['int8_engine']}` engine)" in table
    assert all(f"| {r['bleu']:.2f} | {r['mflop_per_sentence']:,.0f} |" in table for r in rows)


def test_summary_names_the_fastest_peer_at_no_lower_bleu_than_the_best_mask_predict():
    rows = [
        _row("CTranslate2 4.8.5", "int8, beam 1", 1, 90.0, 32.6),
        _row("CTranslate2 4.8.5", "int8, beam 5", 1, 35.0, 33.0),
        _row("fairseq", "float32, beam 1", 1, 100.0, 20.0),  # faster, but worse than mask-predict
        _row("fairseq_ext mask-predict", "10 passes, length beam 3", 1, 12.0, 29.7, "student 3+1"),
        _row("fairseq_ext mask-predict", "2 passes, length beam 1", 1, 60.0, 22.0, "student 3+1"),
    ]
    result = {
        "details": {"rows": rows},
        "metrics": {"student_gap_to_teacher_bleu": 4.1},
        "goals": frontier.GOALS,
        "hardware": "CPU, 1 thread",
    }
    text = frontier.summary(result)
    assert (
        "batch 1: the best mask-predict setting (mask-predict, 10 passes, length beam 3) 12.0 "
        "sentences/s at 29.70 BLEU; CTranslate2 4.8.5 int8, beam 1 of the teacher 3+3 90.0 "
        "sentences/s at 32.60 (7.50x as fast at no lower BLEU)"
    ) in text
    assert "`student_gap_to_teacher_bleu` 4.1 (goal <= 2)" in text


def test_cost_gives_the_decoder_runs_a_student_could_afford_at_the_greedy_speed():
    rows = [
        {
            **_row("CTranslate2 4.8.5", "int8, beam 1", 64, 500.0, 33.0),
            "mflop_per_sentence": 150.0,
            "gflop_per_s": 75.0,
        },
        {
            **_row("fairseq", "float32, beam 1", 64, 100.0, 33.0),
            "mflop_per_sentence": 150.0,
            "gflop_per_s": 15.0,
        },
    ] + [
        {
            **_row("fairseq_ext mask-predict", setting, 64, speed, bleu, "student 3+1"),
            "mflop_per_sentence": 60.0 + 20.0 * runs,  # 60 once, 20 a decoder run
            "gflop_per_s": rate,
        }
        for setting, runs, speed, bleu, rate in (
            ("2 passes, length beam 1", 2, 500.0, 25.0, 50.0),
            ("4 passes, length beam 1, length offset 2", 4, 428.6, 28.0, 60.0),
            ("10 passes, length beam 3", 30, 100.0, 31.0, 66.0),
        )
    ]
    text = frontier.cost(rows, 64)
    assert (
        "runs the whole decoder 30 times a sentence (passes x length beam), 660 MFLOP at 66.0"
        in text
    )
    assert "one cached slot a step, 150 MFLOP at 75.0 GFLOP/s: 4.4x the arithmetic at 0.88x" in text
    # 66 GFLOP/s / 500 sentences/s = 132 MFLOP; (132 - 60) / 20 = 3.6 runs
    assert (
        "allow 132 MFLOP a sentence: 3.6 decoder runs of this student (20.0 MFLOP each beside "
        "60.0 once), which would have to reach its 33.00 BLEU (this student with 2 runs: 25.00)"
    ) in text
    assert (
        frontier.cost([{k: v for k, v in r.items() if k != "mflop_per_sentence"} for r in rows], 64)
        is None
    )
    result = {"details": {"rows": rows}, "metrics": {}, "goals": frontier.GOALS, "hardware": "CPU"}
    assert f"- {text}\n" in frontier.summary(result)

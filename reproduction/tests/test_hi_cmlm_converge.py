"""reproduction/hi_cmlm/converge.py and collect_converged.py on the tests' tiny En-De set, tiny
models and fairseq run in process: a run stops by its patience, a capped run is marked not
converged, a killed run resumes, a kept run is not redone, other settings are refused, and the
page's section says which runs exist."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from reproduction.hi_cmlm import collect_converged, converge
from reproduction.tests.conftest import fork_commands_of
from tests.conftest import TINY_DIMS

PAGE = """# page

## Table 1 at convergence

<!-- table1-converged:start -->
<!-- table1-converged:end -->
"""


def args(tiny_data, tiny_checkpoint, tmp_path, *rows, cap=20, **options):
    out = [
        "--distilled",
        str(tiny_data),
        "--ref",
        str(tiny_data.parent / "raw" / "valid.raw.de"),
        "--teacher",
        str(tiny_checkpoint),
        "--work",
        str(tmp_path / "work"),
        "--kept",
        str(tmp_path / "kept"),
        "--page",
        str(tmp_path / "page.md"),
        "--rows",
        *rows,
        "--seeds",
        "1",
        "--chunk",
        "2",
        "--checkpoint-every",
        "1",
        "--max-updates",
        str(cap),
        "--max-tokens",
        "2000",
        "--offsets",
        "0",
        "1",
        f"--dims={' '.join(TINY_DIMS)}",
        "--jobs",
        "1",
    ]
    for k, v in {"patience": 2, "lr": "1e-9", **options}.items():
        out += [f"--{k}", str(v)]
    return [*out, "--in-process"]


def kept(tmp_path, name):
    return json.loads((tmp_path / "kept" / f"{name}.json").read_text())


def test_runs_stop_by_patience_are_kept_and_not_redone(
    tiny_data,
    tiny_checkpoint,
    tmp_path,
    monkeypatch,
    capsys,
):
    """With a learning rate too small to change the tiny models, validation BLEU never improves:
    every run stops after ``--patience`` validations past its first, by its patience."""
    (tmp_path / "page.md").write_text(PAGE)
    argv = args(tiny_data, tiny_checkpoint, tmp_path, "cmlm", "hi_cmlm", "student")
    converge.main(argv)
    for name in ("cmlm-s1", "hi_cmlm-s1", "student-s1"):
        r = kept(tmp_path, name)
        assert r["stopped"] == "patience"
        assert [c["update"] for c in r["curve"]] == [2, 4, 6]
        assert r["chosen_update"] == 2  # equal scores: the earliest
        assert not (tmp_path / "work" / "runs" / name).exists()  # converged: folder dropped
    hi = kept(tmp_path, "hi_cmlm-s1")["decodings"]
    assert sorted(hi) == sorted(f"hi_cmlm-{s}" for s in converge.STRATEGIES)
    refs = (tiny_data.parent / "raw" / "valid.raw.de").read_text().splitlines()
    for d in hi.values():
        assert len(d["bleu_per_pass"]) == 10 and set(d["bleu_by_length"]) == {
            "[0,10)",
            "[10,23)",
            "[23,inf)",
        }
        hyps = (converge.ROOT / d["hypotheses"]).read_text().splitlines()
        assert len(hyps) == len(refs)
    student = kept(tmp_path, "student-s1")
    assert student["chosen_length_offset"] in (0, 1)
    assert set(student["length_offset_grid"]) == {"0", "1"}
    assert student["test_sample"] is None  # 37 val lines: none in the shipped sample's 201-700
    page = (tmp_path / "page.md").read_text()
    assert "converged (stopped by patience): seeds 1" in page
    assert "No claim is decided yet" in page and "| CMLM (fairseq cmlm_transformer) | 1 |" in page

    def no_training(argv):
        raise AssertionError("a kept run was trained again")

    monkeypatch.setattr(converge, "fairseq_train", no_training)
    capsys.readouterr()
    converge.main(argv)
    assert "kept: cmlm-s1" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        converge.main(args(tiny_data, tiny_checkpoint, tmp_path, "cmlm", patience=3))
    assert str(e.value) == (
        "kept/cmlm-s1.json was made with other settings than asked now: patience 2 (asked now "
        "3); remove it, give another --kept folder or ask for its settings"
    ).replace("kept/", f"{tmp_path / 'kept'}/")


def test_a_killed_run_resumes_and_the_cap_marks_it_not_converged(
    tiny_data, tiny_checkpoint, tmp_path, monkeypatch
):
    """The driver killed (SIGKILL, its worker too) after the run's first validation; called again
    it refuses other settings, then continues the run from its state and checkpoints, and the cap
    stops it: not converged, its checkpoints kept for a higher cap."""
    (tmp_path / "page.md").write_text(PAGE)
    argv = args(tiny_data, tiny_checkpoint, tmp_path, "cmlm", cap=4)
    state_file = tmp_path / "work" / "runs" / "cmlm-s1" / "state.json"
    env = {**os.environ, "PYTHONPATH": str(converge.ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        # without --in-process: the run in a worker process, as a user's call runs it
        [sys.executable, "-m", "reproduction.hi_cmlm.converge", *argv[:-1]],
        cwd=converge.ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + 300
    while not (state_file.is_file() and json.loads(state_file.read_text())["curve"]):
        assert proc.poll() is None and time.time() < deadline, "the run never validated"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = json.loads(state_file.read_text())
    assert [c["update"] for c in before["curve"]] == [2] and not (tmp_path / "kept").exists()
    with pytest.raises(SystemExit) as e:  # the started folder is refused with other settings
        converge.main(args(tiny_data, tiny_checkpoint, tmp_path, "cmlm", cap=4, lr="5e-4"))
    assert "was started with other settings than asked now: lr '1e-9' (asked now '5e-4')" in str(
        e.value
    )
    trained = []

    def train(argv):
        trained.append(int(argv[argv.index("--max-update") + 1]))
        converge.convergence.fairseq_train(argv)

    monkeypatch.setattr(converge, "fairseq_train", train)
    converge.main(argv)
    assert trained in ([4], [])  # update 2 is not trained again (4: unless saved before the kill)
    r = kept(tmp_path, "cmlm-s1")
    assert r["curve"][0] == before["curve"][0] and [c["update"] for c in r["curve"]] == [2, 4]
    assert r["stopped"] == "max-updates (not converged)" and r["sessions"] == 2
    assert (tmp_path / "work" / "runs" / "cmlm-s1" / "checkpoints").is_dir()  # kept for a new cap
    assert "stopped by the cap, not converged: seeds 1" in (tmp_path / "page.md").read_text()


def test_the_section_says_when_no_run_has_finished(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    collect_converged.main(["--kept", str(tmp_path / "none"), "--page", str(page)])
    text = page.read_text()
    assert "**No run has finished yet**" in text and "| CMLM" not in text
    assert "until every row has 3 seeds stopped by their patience" in text


def test_one_command_from_multi30k_files_prepares_distils_and_trains(tmp_path, monkeypatch):
    """--multi30k: the raw files encoded with the shipped model and distilled by the shipped
    teacher (data_prep/multi30k.sh, distill.sh), then a CMLM run at the shipped sizes."""
    src = tmp_path / "multi30k"
    src.mkdir()
    sample = converge.ROOT / "examples" / "quickstart" / "data"
    for split, name, n in (("train", "train", 40), ("val", "valid", 12)):
        for lang in ("en", "de"):
            lines = (sample / f"{name}.{lang}").read_text().splitlines()[:n]
            (src / f"{split}.{lang}").write_text("\n".join(lines) + "\n")
    (tmp_path / "page.md").write_text(PAGE)
    fork_commands_of(monkeypatch, converge)
    converge.main(
        [
            "--multi30k",
            str(src),
            "--work",
            str(tmp_path / "work"),
            "--kept",
            str(tmp_path / "kept"),
            "--page",
            str(tmp_path / "page.md"),
            "--rows",
            "cmlm",
            "--seeds",
            "1",
            "--chunk",
            "1",
            "--max-updates",
            "1",
            "--max-tokens",
            "1024",
            "--jobs",
            "1",
            "--in-process",
        ]
    )
    distilled = tmp_path / "work" / "distill" / "bin"
    r = kept(tmp_path, "cmlm-s1")
    assert r["settings"]["teacher_sha256"] == converge.sha256(converge.MODEL_DIR / "teacher.pt")
    assert r["settings"]["train_targets_sha256"] == converge.sha256(
        distilled / "train.en-de.de.bin"
    )
    assert str(distilled) in r["command"] and "--encoder-embed-dim 192" in r["command"]
    assert (
        len((converge.ROOT / r["decodings"]["cmlm"]["hypotheses"]).read_text().splitlines()) == 12
    )

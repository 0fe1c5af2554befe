"""examples/quickstart/results.py, the results file of `make quickstart`: both decodings' BLEU,
BLEU per pass and by length as `python -m fairseq_ext.analysis` wrote them, the updates and
training seconds from fairseq-train's log, the wall time and the machine."""

import json
import subprocess
import sys
import time

from tests.conftest import ROOT, cli_env

SCRIPT = ROOT / "examples" / "quickstart" / "results.py"


def test_quickstart_results_file(tmp_path):
    analysis = {}
    for k, name in enumerate(("shipped", "continued")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "bleu.json").write_text(
            json.dumps({"score": 20.0 + k, "signature": "nrefs:1|sig"})
        )
        (tmp_path / name / "seconds").write_text(f"{40 + k}\n")
        analysis[name] = {
            "bleu_per_iteration": [10.0 + i + k for i in range(10)],
            "bleu_by_length": {"[0,10)": 30.0, "[10,23)": 20.0 + k, "[23,inf)": 10.0},
        }
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "analysis.json").write_text(json.dumps(analysis))
    (tmp_path / "train.log").write_text(
        "{'optimization': {'max_epoch': 100, 'lr': [0.0001], 'stop_time_hours': 0.05}}\n"
        "| num_updates 40 | ...\n| num_updates 73 | ...\ndone training in 181.2 seconds\n"
    )
    out = tmp_path / "results.json"
    start = int(time.time()) - 300
    subprocess.run(
        [
            sys.executable,
            SCRIPT,
            "--work",
            tmp_path,
            "--minutes",
            "3",
            "--start",
            str(start),
            "--out",
            out,
        ],
        check=True,
        capture_output=True,
        text=True,
        env=cli_env(),
    )
    res = json.loads(out.read_text())
    assert res["command"] == "make quickstart" and res["training_minutes_budget"] == 3
    assert res["training"] == {"updates": 73, "seconds": 181.2, "lr": 0.0001}
    assert res["shipped"]["bleu"] == 20.0 and res["continued"]["bleu"] == 21.0
    assert res["continued"]["bleu_per_pass"] == analysis["continued"]["bleu_per_iteration"]
    assert res["continued"]["bleu_by_length"]["[10,23)"] == 21.0 and res["shipped"]["seconds"] == 40
    assert 300 <= res["wall_seconds"] < 400
    data = ROOT / "examples" / "quickstart" / "data"
    assert res["data"]["train_pairs"] == len(
        (data / "train.en").read_text(encoding="utf-8").splitlines()
    )
    assert res["hardware"]["cores"] >= 1 and res["hardware"]["cpu"]
    shipped = ROOT / "examples" / "quickstart" / "model" / "checkpoint.pt"
    assert (
        res["student_sha256"]
        == subprocess.run(
            ["sha256sum", str(shipped)], capture_output=True, text=True, check=True
        ).stdout.split()[0]
    )
    assert len(res["hardware"]["load_average_1_5_15_min"]) == 3

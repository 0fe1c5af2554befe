"""examples/prophetnet/collect_gigaword.py: table 2 is built from the runs' own results.json
files (ProphetNet/Transformer runs of gigaword.sh and the UniLM run, which write wall time
differently), in a fixed order, with a plot and published copies."""
import importlib.util
import json
import subprocess
import sys

from tests.conftest import ROOT

SCRIPT = ROOT / "examples" / "prophetnet" / "collect_gigaword.py"


def _module():
    spec = importlib.util.spec_from_file_location("collect_gigaword", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(work, name, result):
    (work / "runs" / name).mkdir(parents=True)
    (work / "runs" / name / "results.json").write_text(json.dumps(result))


def test_collect_reads_both_result_formats_in_table_order(tmp_path):
    module = _module()
    _write(tmp_path, "unilm", {"rouge1_f1": 5.0, "rouge2_f1": 1.0, "rougeL_f1": 4.5, "sentences": 1000,
                               "updates": 500, "wall_seconds": 300})
    _write(tmp_path, "p2", {"rouge1_f1": 12.5, "rouge2_f1": 2.0, "rougeL_f1": 12.0, "sentences": 1000,
                            "pretrain_updates": 150, "finetune_updates": 500, "wall_seconds": {"total": 400}})
    summary = module.collect(tmp_path, "cpu")
    assert list(summary["runs"]) == ["p2", "unilm"]
    assert summary["runs"]["unilm"]["finetune_updates"] == 500 and summary["runs"]["unilm"]["pretrain_updates"] == 0
    assert summary["runs"]["p2"]["wall_seconds"] == 400 and summary["wall_seconds_all_runs"] == 700
    table = module.markdown(summary).splitlines()
    assert table[2] == "| ProphetNet n=2 | 150 | 500 | 12.50 | 2.00 | 12.00 | 400 |"
    proc = subprocess.run([sys.executable, SCRIPT, "--work", tmp_path, "--scale", "cpu", "--publish",
                           tmp_path / "pub"], capture_output=True, text=True, check=True)
    assert "published to" in proc.stdout
    assert json.loads((tmp_path / "pub" / "results.json").read_text()) == summary
    assert (tmp_path / "pub" / "figures" / "gigaword_rouge.png").stat().st_size > 5000


def test_collect_without_runs_is_one_clear_error(tmp_path):
    (tmp_path / "runs").mkdir()
    proc = subprocess.run([sys.executable, SCRIPT, "--work", tmp_path, "--scale", "cpu"], capture_output=True,
                          text=True)
    assert proc.returncode == 1 and "has a results.json" in proc.stderr and "Traceback" not in proc.stderr

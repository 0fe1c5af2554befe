"""Quiet by default (``fairseq_ext.quiet``): the plugin's command lines and the hub API print the
results and the plugin's own messages, not fairseq's INFO log, Hydra's deprecation warnings or
torch's ``pin_memory`` warning; ``--verbose`` / ``verbose=True`` shows them. fairseq's own
command lines print the same warnings with the plugin loaded as without it. Python's warnings
are on here (the other tests' ``PYTHONWARNINGS=ignore`` is removed)."""
import logging
import subprocess
import sys
import warnings

import pytest

from fairseq_ext import quiet
from tests.conftest import ROOT, TINY_DIMS, USER_DIR, cli_env

MODEL = ROOT / "examples" / "quickstart" / "model"
FAIRSEQ_IMPORT_LOG = "Please install tensorboardX"
HYDRA = "is no longer experimental"
PIN_MEMORY = "'pin_memory' argument is set as true"


def loud_env() -> dict:
    env = cli_env()
    env.pop("PYTHONWARNINGS")
    return env


def python(*args, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, env=loud_env(), **kw)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_hush_drops_the_noise_and_verbose_brings_it_back():
    hydra = "hydra.experimental.compose() is no longer experimental. Use hydra.compose()"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # what a plain python run shows
        try:
            quiet.hush()
            warnings.warn(hydra)
            warnings.warn("\nThe version_base parameter is not specified.")
            warnings.warn("the user's own warning")
            assert not logging.getLogger("fairseq.tasks.fairseq_task").isEnabledFor(logging.INFO)
            plugin_log = logging.getLogger("fairseq_ext.convert")  # the plugin's messages: as the root logger says
            assert plugin_log.getEffectiveLevel() == logging.getLogger().getEffectiveLevel()
        finally:
            quiet.hush(verbose=True)
        warnings.warn(hydra)
    assert [str(w.message) for w in caught] == ["the user's own warning", hydra]
    assert logging.getLogger("fairseq").level == logging.NOTSET


@pytest.mark.parametrize("command", [
    ["-m", "fairseq_ext.analysis", "--help"], ["-m", "fairseq_ext.analysis.draw_mask", "--help"],
    ["-m", "fairseq_ext.checkpoints", "--help"], ["-m", "fairseq_ext.options_table"],
    [ROOT / "data_prep" / "keep_tokens.py", "--help"],
], ids=lambda c: str(c[1]).rsplit("/", 1)[-1])
def test_plugin_commands_print_no_fairseq_import_log(command):
    assert python(*command).stderr == ""


def test_options_table_verbose_shows_fairseqs_log():
    assert FAIRSEQ_IMPORT_LOG in python("-m", "fairseq_ext.options_table", "--verbose").stderr


def test_convert_prints_only_the_plugins_messages_unless_verbose(tmp_path):
    from tests.test_convert import tiny_bert

    tiny_bert(tmp_path / "bert")
    cmd = ["-m", "fairseq_ext.convert", "from-transformers", tmp_path / "bert"]
    lines = python(*cmd, tmp_path / "out").stderr.splitlines()
    assert lines and all(line.startswith("INFO fairseq_ext.") for line in lines), lines
    assert HYDRA in python(*cmd, tmp_path / "out2", "--verbose").stderr


HUB = ("from fairseq_ext import hub\n"
       "m = hub.from_pretrained(sys.argv[1], verbose=sys.argv[2] == 'verbose')\n"
       "print(m.translate('a man is riding a bike .'))\n"
       "print(m.translate('two dogs play in the snow .'))\n")


def test_hub_prints_the_translations_only_unless_verbose():
    quiet_run = python("-c", "import sys\n" + HUB, MODEL, "quiet")
    assert quiet_run.stderr == "" and len(quiet_run.stdout.splitlines()) == 2
    loud = python("-c", "import sys\n" + HUB, MODEL, "verbose").stderr
    assert FAIRSEQ_IMPORT_LOG in loud and PIN_MEMORY in loud and loud.count("fairseq.tasks.fairseq_task") >= 8


def warning_lines(stderr: str) -> list[str]:
    return sorted(line.split(": ", 1)[1] for line in stderr.splitlines() if "Warning: " in line)


def test_fairseq_train_warns_alike_with_and_without_the_plugin(tiny_data, tmp_path):
    base = ["fairseq-train", tiny_data, "--task", "translation", "--arch", "transformer", *TINY_DIMS,
            "--optimizer", "adam", "--lr", "5e-4", "--max-tokens", "2000", "--max-update", "1", "--no-save",
            "--num-workers", "0", "--no-progress-bar"]
    plain = subprocess.run(base, capture_output=True, text=True, env=loud_env(), cwd=tmp_path)
    plugin = subprocess.run(base + ["--user-dir", USER_DIR], capture_output=True, text=True, env=loud_env(),
                            cwd=tmp_path)
    assert plain.returncode == 0 and plugin.returncode == 0, plugin.stderr[-3000:]
    assert warning_lines(plain.stderr) and warning_lines(plugin.stderr) == warning_lines(plain.stderr)

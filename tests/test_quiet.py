"""Quiet by default (``fairseq_ext.fairseq_changes.quiet``): the plugin's command lines, fairseq's
commands of the plugin's tasks and the hub API print the results and the plugin's own messages, not
fairseq's configuration and set-up log, Hydra's deprecation warnings or torch's ``pin_memory`` and
autocast warnings; ``--verbose`` / ``verbose=True`` shows them. fairseq's own tasks print the same
with the plugin loaded as without it. Python's warnings are on here (the other tests'
``PYTHONWARNINGS=ignore`` is removed), and every command is a process of its own."""

import logging
import re
import subprocess
import sys
import warnings

import pytest

from fairseq_ext.fairseq_changes import quiet
from tests.conftest import ROOT, TINY_DIMS, USER_DIR, cli_env, generate_args, train_args

MODEL = ROOT / "examples" / "quickstart" / "model"
FAIRSEQ_IMPORT_LOG = "Please install tensorboardX"
HYDRA = "is no longer experimental"
PIN_MEMORY = "'pin_memory' argument is set as true"


def loud_env() -> dict:
    env = cli_env()
    env.pop("PYTHONWARNINGS")
    env.pop(quiet.VERBOSE_ENV, None)
    return env


def python(*args, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, *map(str, args)], capture_output=True, text=True, env=loud_env(), **kw
    )
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
            plugin_log = logging.getLogger(
                "fairseq_ext.convert"
            )  # the plugin's messages: as the root logger says
            assert plugin_log.getEffectiveLevel() == logging.getLogger().getEffectiveLevel()
        finally:
            quiet.hush(verbose=True)
        warnings.warn(hydra)
    assert [str(w.message) for w in caught] == ["the user's own warning", hydra]
    assert logging.getLogger("fairseq").level == logging.NOTSET


@pytest.mark.parametrize(
    "command",
    [
        ["-m", "fairseq_ext.analysis", "--help"],
        ["-m", "fairseq_ext.analysis.draw_mask", "--help"],
        ["-m", "fairseq_ext.checkpoints", "--help"],
        ["-m", "fairseq_ext.options_table"],
        [ROOT / "data_prep" / "keep_tokens.py", "--help"],
    ],
    ids=lambda c: str(c[1]).rsplit("/", 1)[-1],
)
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


HUB = (
    "from fairseq_ext import hub\n"
    "m = hub.from_pretrained(sys.argv[1], verbose=sys.argv[2] == 'verbose')\n"
    "print(m.translate('a man is riding a bike .'))\n"
    "print(m.translate('two dogs play in the snow .'))\n"
)


def test_hub_prints_the_translations_only_unless_verbose():
    quiet_run = python("-c", "import sys\n" + HUB, MODEL, "quiet")
    assert quiet_run.stderr == "" and len(quiet_run.stdout.splitlines()) == 2
    loud = python("-c", "import sys\n" + HUB, MODEL, "verbose").stderr
    # fairseq's log while loading (a call of one batch builds no batch iterator or DataLoader,
    # so it logs nothing more and warns of no pin_memory)
    assert FAIRSEQ_IMPORT_LOG in loud and "INFO:fairseq.tasks.translation:[de] dictionary" in loud


def command(cmd: list, cwd, extra_env: dict | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [str(c) for c in cmd],
        capture_output=True,
        text=True,
        env=loud_env() | (extra_env or {}),
        cwd=cwd,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


# what a quiet command prints: fairseq's progress and results, and the notice fairseq logs while
# its command imports it, before --user-dir is read (absent where tensorboardX is installed)
KEPT = re.compile(
    r"\| (train_inner|train|valid) \||\| Saved checkpoint |\| num\. shared model params: "
    r"|\| done training in |Please install tensorboardX"
)
NOISE_SIGNS = (
    "'_name': ",
    "HiCMLMTransformerModel(",
    "can_reuse_epoch_itr",
    "Preparing to save checkpoint",
    HYDRA,
    "Warning: ",
)


@pytest.mark.parametrize("task", ["cmlm_hybrid", "position_masked_lm"])
def test_a_plugin_task_trains_with_progress_and_results_only(task, tiny_data, mono_data, tmp_path):
    if task == "cmlm_hybrid":
        cmd = train_args(tiny_data, tmp_path / "save", updates=2)
    else:
        from tests.test_cli_posmask import pretrain_args

        cmd = pretrain_args(mono_data, tmp_path / "save", "--max-update", "2")
    proc = command(cmd, tmp_path)
    assert proc.stderr == ""  # no Hydra, pin_memory or autocast warning
    lines = proc.stdout.splitlines()
    assert [
        line for line in lines if not KEPT.search(line) and "| INFO | fairseq_ext." not in line
    ] == []
    for kept in ("| valid |", "| train |", "| Saved checkpoint ", "| done training in "):
        assert any(kept in line for line in lines), kept


def test_verbose_keeps_everything_fairseq_prints(tiny_data, tmp_path):
    proc = command(train_args(tiny_data, tmp_path / "save", "--verbose", updates=2), tmp_path)
    for sign in NOISE_SIGNS:
        assert sign in proc.stdout + proc.stderr, sign
    assert PIN_MEMORY in proc.stderr and "'_name': 'cmlm_hybrid'" in proc.stdout


def test_a_plugin_task_decodes_with_hypotheses_and_bleu_only(tiny_data, tiny_checkpoint, tmp_path):
    quiet_run = command(generate_args(tiny_data, tiny_checkpoint), tmp_path)
    loud = command(generate_args(tiny_data, tiny_checkpoint, "--verbose"), tmp_path)
    assert quiet_run.stdout == loud.stdout  # the hypotheses and the BLEU line, either way
    lines = quiet_run.stdout.splitlines()
    assert sum(line.startswith("H-") for line in lines) == 21
    # mask-predict's beam is its length beam (--iter-decode-with-beam, 1 here), not --beam's 5
    assert lines[-1].startswith("Generate test with beam=1: BLEU4 = ")
    notes = [line for line in quiet_run.stderr.splitlines() if "tensorboardX" not in line]
    assert len(notes) == 1 and notes[0].startswith(
        "INFO:fairseq_cli.generate:Translated 21 sentences"
    )
    for sign in ("'_name': 'cmlm_hybrid'", "loading model(s) from", HYDRA, PIN_MEMORY):
        assert sign in loud.stderr and sign not in quiet_run.stderr, sign


def test_the_environment_keeps_everything_for_a_plugin_task(tiny_data, tiny_checkpoint, tmp_path):
    """``FAIRSEQ_EXT_VERBOSE=1``, for a command without ``--verbose`` (what the scripts of
    examples/ export for their log files, and fairseq-hydra-train)."""
    loud = command(
        generate_args(tiny_data, tiny_checkpoint), tmp_path, {quiet.VERBOSE_ENV: "1"}
    ).stderr
    assert "'_name': 'cmlm_hybrid'" in loud and HYDRA in loud


SET_UP = (
    "import logging, sys\n"
    "from omegaconf import OmegaConf\n"
    "from fairseq import tasks\n"
    "from fairseq.dataclass.configs import FairseqConfig\n"
    "from fairseq_ext import plugin\n"
    "plugin.load()\n"
    "from fairseq_ext.tasks.cmlm_hybrid import CMLMHybridConfig\n"
    "before = logging.getLogger('fairseq').level\n"
    "config = CMLMHybridConfig(_name='cmlm_hybrid', data=sys.argv[1], source_lang='en', "
    "target_lang='de')\n"
    "tasks.setup_task(OmegaConf.structured(FairseqConfig(task=config)).task)\n"
    "print(before, logging.getLogger('fairseq').level)\n"
)


@pytest.mark.parametrize(
    "env, levels", [({}, "0 30"), ({quiet.VERBOSE_ENV: "1"}, "0 0")], ids=["quiet", "verbose"]
)
def test_a_plugin_task_set_up_without_fairseqs_parser_quiets_fairseq_unless_the_environment_says(
    env, levels, tiny_data, tmp_path
):
    """What ``fairseq-hydra-train`` and Python code do: no ``add_args``, the task's ``setup_task``
    decides (loading the plugin alone changes nothing)."""
    proc = command([sys.executable, "-c", SET_UP, tiny_data], tmp_path, env)
    assert proc.stdout.split() == levels.split()


PARSE = (
    "import logging, os, sys\n"
    "from fairseq import options\n"
    "from fairseq_ext import plugin\n"
    "plugin.load()\n"
    "options.parse_args_and_arch(options.get_training_parser(), sys.argv[1:])\n"
    "print(os.environ.get('FAIRSEQ_EXT_VERBOSE'), logging.getLogger('fairseq').level)\n"
)


def test_verbose_is_handed_to_the_processes_the_command_starts(tiny_data, tmp_path):
    """The ranks fairseq spawns for a distributed training set their task up anew, without
    fairseq's parser: the environment tells them."""
    args = [tiny_data, "--task", "cmlm_hybrid", "--arch", "hi_cmlm_transformer_tiny"]
    assert command([sys.executable, "-c", PARSE, *args, "--verbose"], tmp_path).stdout.split() == [
        "1",
        "0",
    ]


def normalised(text: str, save_dir) -> list[str]:
    """``text`` less what differs from run to run: times, speeds, the save folder, the user dir."""
    text = text.replace(str(save_dir), "SAVE")
    text = re.sub(r"'user_dir': [^,]+|user_dir=[^,]+", "user_dir", text)
    return [
        re.sub(r"\d+(\.\d+)?(e-?\d+)?", "N", re.sub(r"^[\d-]+ [\d:]+ \| ", "", line))
        for line in text.splitlines()
    ]


def test_fairseq_train_of_a_fairseq_task_prints_the_same_with_and_without_the_plugin(
    tiny_data, tmp_path
):
    base = [
        "fairseq-train",
        tiny_data,
        "--task",
        "translation",
        "--arch",
        "transformer",
        *TINY_DIMS,
        "--optimizer",
        "adam",
        "--lr",
        "5e-4",
        "--max-tokens",
        "2000",
        "--max-update",
        "2",
        "--num-workers",
        "0",
        "--no-progress-bar",
        "--log-format",
        "simple",
        "--seed",
        "1",
    ]
    runs = {}
    for name, extra in (("plain", []), ("plugin", ["--user-dir", USER_DIR])):
        save = tmp_path / name
        proc = command(base + ["--save-dir", save, *extra], tmp_path)
        runs[name] = (normalised(proc.stdout, save), normalised(proc.stderr, save))
    assert runs["plugin"] == runs["plain"]
    stdout, stderr = runs["plain"]
    assert any("'_name': 'translation'" in line for line in stdout) and any(
        HYDRA in line for line in stderr
    )
    assert any("| fairseq.tasks.fairseq_task | can_reuse_epoch_itr" in line for line in stdout)

"""``--help`` lists the options of the ``--task``, ``--arch`` and ``--criterion`` it is given
(``fairseq_ext.fairseq_changes.cli_help``): every option of every plugin model, task and
criterion, with the default the architecture gives it; the issue's command line through
``fairseq-train`` itself. A mistyped ``--task``, ``--arch`` or ``--criterion`` is one line naming
the closest registered name, exit status 2, and a missing ``--arch`` one line naming the task's
architectures; every other error is argparse's own, and fairseq without the plugin is unchanged."""

import itertools
import re

import pytest
from fairseq import options
from fairseq.models import ARCH_MODEL_INV_REGISTRY

from fairseq_ext.common.config_fields import flag
from fairseq_ext.options_table import _own_fields, registered
from tests.conftest import USER_DIR, run

ENTRIES = {
    kind: [e for e in registered() if e[0] == kind] for kind in ("Model", "Task", "Criterion")
}
# each line: one model, one task and one criterion of the plugin (help parses, it builds nothing)
LINES = list(itertools.zip_longest(*ENTRIES.values()))


def help_text(argv: list[str], capsys) -> str:
    parser = options.get_training_parser()
    with pytest.raises(SystemExit) as stop:
        options.parse_args_and_arch(parser, argv + ["--help"])
    assert stop.value.code in (0, None)
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("line", LINES, ids=lambda line: "+".join(e[1] for e in line if e))
def test_help_lists_every_option_of_the_plugins_model_task_and_criterion(line, capsys):
    model, task, criterion = line
    argv = ["--arch", ARCH_MODEL_INV_REGISTRY[model[1]][0] if model else "transformer"]
    if task:
        argv += ["--task", task[1]]
    if criterion:
        argv += ["--criterion", criterion[1]]
    text = help_text(argv, capsys)
    wanted = [
        flag(f.name) for entry in line if entry for f in _own_fields(entry[2]) if f.name != "data"
    ]
    assert wanted and [f for f in wanted if f"{f} " not in text] == []
    if task and any(f.name == "data" for f in _own_fields(task[2])):  # fairseq's one positional
        assert "positional arguments: data " in text


def test_help_gives_the_architectures_defaults(capsys):
    text = help_text(["--task", "cmlm_hybrid", "--arch", "hi_cmlm_transformer_tiny"], capsys)
    assert "--encoder-layers ENCODER_LAYERS encoder: number of layers (default: 3)" in text
    assert "(the paper's choice) (default: fence_replace)" in text
    assert "is fairseq's cmlm_transformer (default: 0.5)" in text


def test_options_parse_as_before_without_help():
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(
        parser,
        [
            "data",
            "--task",
            "cmlm_hybrid",
            "--arch",
            "hi_cmlm_transformer_tiny",
            "--train-copy-share",
            "0.25",
        ],
    )
    assert args.train_copy_share == 0.25 and args.encoder_layers == 3 and args.data == "data"


def test_fairseq_train_help_lists_the_hi_cmlm_options():
    proc = run(
        [
            "fairseq-train",
            "--user-dir",
            USER_DIR,
            "--task",
            "cmlm_hybrid",
            "--arch",
            "hi_cmlm_transformer_tiny",
            "--help",
        ]
    )
    for option in (
        "--hybrid-strategy {all_mask,all_copied,weighted_sum,fence_replace}",
        "--train-copy-share",
        "--fence-first {mask,copy}",
        "--length-loss-factor",
    ):
        assert f"\n  {option}" in proc.stdout, option


@pytest.mark.parametrize("task", [e[1] for e in ENTRIES["Task"]])
def test_help_without_arch_lists_the_tasks_options_and_says_what_arch_adds(task, capsys):
    text = help_text(
        ["--task", task], capsys
    )  # fairseq's second pass stopped with a RuntimeError here
    wanted = [
        flag(f.name)
        for e in ENTRIES["Task"]
        if e[1] == task
        for f in _own_fields(e[2])
        if f.name != "data"
    ]
    assert [f for f in wanted if f"{f} " not in text] == []
    assert text.endswith(
        "The model's options are listed with --arch ARCH (the architectures: the --arch choices "
        "above)."
    )


@pytest.mark.parametrize("command", ["fairseq-train", "fairseq-generate"])
def test_help_of_every_plugin_task_ends_with_status_0_and_no_traceback(command):
    for task in [e[1] for e in ENTRIES["Task"]]:
        proc = run([command, "--user-dir", USER_DIR, "--task", task, "--help"], check=False)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (task, proc.stderr[-1500:])
        assert "usage:" in proc.stdout


def parse_error(argv: list[str], capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as stop:
        options.parse_args_and_arch(options.get_training_parser(), argv)
    captured = capsys.readouterr()
    assert captured.out == ""
    return stop.value.code, captured.err


@pytest.mark.parametrize(
    "argv, line",
    [
        (
            ["--task", "cmlm_hybird"],
            "argument --task: invalid choice: 'cmlm_hybird'; did you mean 'cmlm_hybrid'?",
        ),
        (
            ["--task", "translatoin"],
            "argument --task: invalid choice: 'translatoin'; did you mean 'translation'?",
        ),
        (
            ["--task", "cmlm_hybrid", "--arch", "hi_cmlm_tiny"],
            "argument --arch/-a: invalid choice: 'hi_cmlm_tiny'; "
            "did you mean 'hi_cmlm_transformer_tiny'?",
        ),
        (
            [
                "--task",
                "translation_prophetnet",
                "--arch",
                "prophetnet_tiny",
                "--criterion",
                "ngram_languge_loss",
            ],
            "argument --criterion: invalid choice: 'ngram_languge_loss'; "
            "did you mean 'ngram_language_loss'?",
        ),
        (
            ["--task", "cmlm_hybird", "--help"],
            "argument --task: invalid choice: 'cmlm_hybird'; did you mean 'cmlm_hybrid'?",
        ),
    ],
)
def test_a_mistyped_registry_name_is_one_line_with_the_closest_name(argv, line, capsys):
    code, err = parse_error(["data", *argv], capsys)
    assert code == 2
    assert re.fullmatch(
        r"\S+: error: " + re.escape(line + " (--help lists the choices)") + "\n", err
    ), err


def test_a_name_close_to_nothing_is_one_line_with_the_choices(capsys):
    code, err = parse_error(["data", "--task", "zzzqqq"], capsys)
    assert code == 2 and len(err.splitlines()) == 1
    assert (
        "argument --task: invalid choice: 'zzzqqq' (choose from " in err and "'cmlm_hybrid'" in err
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["--task", "cmlm_hybrid", "--max-tokens", "abc"],
        ["--task", "translation", "--max-tokens", "abc"],
        ["--arch", "transformer", "--task"],
    ],
)
def test_other_errors_are_argparses_own(argv, capsys):
    code, err = parse_error(["data", *argv], capsys)
    with pytest.raises(SystemExit):
        options.get_training_parser().parse_known_args(
            ["data", *argv]
        )  # fairseq's first pass, argparse's answer
    assert code == 2 and err == capsys.readouterr().err and err.startswith("usage: ")


def test_fairseq_train_mistyped_task_with_and_without_the_plugin():
    with_plugin = run(
        ["fairseq-train", "data", "--user-dir", USER_DIR, "--task", "cmlm_hybird"],
        check=False,
        fresh=True,
    )
    lines = [line for line in with_plugin.stderr.splitlines() if " | INFO | " not in line]
    assert with_plugin.returncode == 2 and lines == [
        "fairseq-train: error: argument --task: invalid choice: 'cmlm_hybird'; "
        "did you mean 'cmlm_hybrid'? (--help lists the choices)"
    ]
    fairseq_alone = run(["fairseq-train", "data", "--task", "translatoin"], check=False, fresh=True)
    assert fairseq_alone.returncode == 2 and fairseq_alone.stderr.startswith("usage: fairseq-train")
    assert "invalid choice: 'translatoin' (choose from " in fairseq_alone.stderr.splitlines()[-1]


@pytest.mark.parametrize("task", [e[1] for e in ENTRIES["Task"]])
def test_a_missing_arch_is_one_line_naming_the_tasks_architectures(task, capsys):
    from fairseq_ext.common.families import FAMILIES

    code, err = parse_error(["data", "--task", task], capsys)
    (family,) = [f for f in FAMILIES if task in f.tasks]
    names = [a for m in family.models for a in ARCH_MODEL_INV_REGISTRY[m]]
    assert code == 2 and err.endswith(
        f": error: --arch is missing; the architectures of --task {task}: {', '.join(names)}\n"
    ), err
    assert len(err.splitlines()) == 1 and names


def test_fairseq_train_without_arch_is_one_line():
    proc = run(
        ["fairseq-train", "data", "--user-dir", USER_DIR, "--task", "cmlm_hybrid"], check=False
    )
    lines = [line for line in proc.stderr.splitlines() if " | INFO | " not in line]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-2000:]
    assert lines[0].startswith("fairseq-train: error: --arch is missing; the architectures of ")
    assert "hi_cmlm_transformer_tiny" in lines[0]

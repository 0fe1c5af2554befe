"""What the plugin changes in fairseq (``fairseq_ext.fairseq_changes``): fairseq's own
``translation`` trains and decodes the same with ``--user-dir fairseq_ext`` as without it; each
no row replaces a module object or shadows a builtin; ``FAIRSEQ_EXT_PATCHES``
turns changes off; the table of ``docs/fairseq-patches.md`` is the table's, and the README links it
(``python -m tests.test_fairseq_patches`` rewrites them). Whom each change serves:
``tests/test_patch_scope.py``."""

from __future__ import annotations

import subprocess
import sys

import torch

from fairseq_ext import fairseq_changes
from fairseq_ext.checkpoints.dictionaries import RECORD_KEY, recorded_dictionaries
from tests.conftest import ROOT, TINY_DIMS, USER_DIR, cli_env, read_sample, run, write_lines

PAGE, README = ROOT / "docs" / "fairseq-patches.md", ROOT / "README.md"
TABLE = ("<!-- fairseq-patches:start -->", "<!-- fairseq-patches:end -->")
# entries that differ between any two runs: the two command lines' own options, and what
# fairseq measures in wall-clock time (the training time, its time meters' start and total)
OWN_OPTIONS = {"user_dir", "save_dir"}
CLOCKS = {"previous_training_time"}
CLOCK_METERS, CLOCK_FIELDS = {"TimeMeter", "StopwatchMeter"}, {"init", "start", "sum"}


def _tiny_translation_data(folder):
    raw = folder / "raw"
    raw.mkdir()
    for split, n in (("train", 64), ("valid", 8), ("test", 8)):
        for lang in ("en", "de"):
            write_lines(
                raw / f"{split}.{lang}", [line.lower() for line in read_sample(split, lang, n)]
            )
    run(
        [
            "fairseq-preprocess",
            "-s",
            "en",
            "-t",
            "de",
            "--joined-dictionary",
            "--workers",
            "1",
            "--trainpref",
            raw / "train",
            "--validpref",
            raw / "valid",
            "--testpref",
            raw / "test",
            "--destdir",
            folder / "bin",
        ]
    )
    return folder / "bin"


def _comparable(value):
    """``value`` with tensors as (dtype, shape, values), without ``OWN_OPTIONS``, ``CLOCKS`` and
    the wall-clock fields of fairseq's time meters (saved as ``(priority, name, class, state)``)."""
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items() if k not in OWN_OPTIONS | CLOCKS}
    if isinstance(value, tuple) and len(value) == 4 and value[2] in CLOCK_METERS:
        return [*value[:3], {k: v for k, v in value[3].items() if k not in CLOCK_FIELDS}]
    if isinstance(value, (list, tuple)):
        return [_comparable(v) for v in value]
    if isinstance(value, torch.Tensor):
        return (str(value.dtype), tuple(value.shape), value.tolist())
    if hasattr(value, "__dict__") and not isinstance(value, type):  # argparse.Namespace
        return (type(value).__name__, _comparable(vars(value)))
    return value


def _together(commands: dict[str, list], **environments: dict) -> dict[str, str]:
    """Run the named commands at the same time (each with its extra environment); their stdout."""
    procs = {
        name: subprocess.Popen(
            [str(c) for c in cmd],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**cli_env(), **environments.get(name, {})},
        )
        for name, cmd in commands.items()
    }
    outputs = {name: proc.communicate() for name, proc in procs.items()}
    for name, proc in procs.items():
        assert proc.returncode == 0, f"{name}: {outputs[name][1][-3000:]}"
    return {name: out for name, (out, _err) in outputs.items()}


def _hypotheses(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line[:2] in ("S-", "T-", "H-", "D-", "P-")]


def test_translation_trains_and_decodes_the_same_with_and_without_the_plugin(tmp_path):
    """Two runs of fairseq's ``translation`` (``--seed 1``, CPU), without and with ``--user-dir
    fairseq_ext``. torch.save writes the same bytes for the same dict, but fairseq records the
    training time and the command's own ``--save-dir``/``--user-dir`` in the checkpoint, so the
    checkpoints are compared loaded: key for key and tensor for tensor, those entries left out
    (``OWN_OPTIONS``, ``CLOCKS``, the time meters' clock fields). fairseq-generate
    without the plugin cannot load the checkpoint on torch >= 2.6 (it pickles
    ``argparse.Namespace``), so that run loads as torch < 2.6 did
    (``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1``); the hypotheses must be the same lines."""
    data = _tiny_translation_data(tmp_path)
    common = [
        data,
        "--task",
        "translation",
        "-s",
        "en",
        "-t",
        "de",
        "--arch",
        "transformer",
        *TINY_DIMS,
        "--optimizer",
        "adam",
        "--lr",
        "5e-4",
        "--max-tokens",
        "1000",
        "--max-update",
        "4",
        "--seed",
        "1",
        "--save-interval-updates",
        "2",
        "--no-progress-bar",
        "--num-workers",
        "0",
    ]
    runs = {"plain": [], "plugin": ["--user-dir", USER_DIR]}
    _together(
        {
            name: ["fairseq-train", *common, "--save-dir", tmp_path / name, *extra]
            for name, extra in runs.items()
        }
    )
    states = {
        name: {
            p.name: torch.load(p, map_location="cpu", weights_only=False)
            for p in sorted((tmp_path / name).glob("*.pt"))
        }
        for name in runs
    }
    generated = _together(
        {
            name: [
                "fairseq-generate",
                data,
                "--task",
                "translation",
                "-s",
                "en",
                "-t",
                "de",
                "--path",
                tmp_path / name / "checkpoint_last.pt",
                "--beam",
                "2",
                "--batch-size",
                "4",
                *extra,
            ]
            for name, extra in runs.items()
        },
        plain={"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"},
    )
    hypotheses = {name: _hypotheses(out) for name, out in generated.items()}
    assert (
        sorted(states["plain"]) == sorted(states["plugin"])
        and "checkpoint_last.pt" in states["plain"]
    )
    for file in states["plain"]:
        plain, plugin = states["plain"][file], states["plugin"][file]
        assert RECORD_KEY not in plugin and plugin["task_state"] == plain["task_state"] == {}
        assert _comparable(plugin) == _comparable(plain), file
    assert hypotheses["plain"] and hypotheses["plugin"] == hypotheses["plain"]


def test_patches_off_changes_nothing_and_off_by_name_leaves_out_those():
    code = (
        "import sys\nfrom fairseq import checkpoint_utils, options\nfrom fairseq.file_io import "
        "PathManager\n"
        "before = (checkpoint_utils.load_checkpoint_to_cpu, PathManager.copy, "
        "options.parse_args_and_arch, "
        "sys.excepthook)\n"
        "from fairseq_ext import plugin; plugin.load()\n"
        "after = (checkpoint_utils.load_checkpoint_to_cpu, PathManager.copy, "
        "options.parse_args_and_arch, "
        "sys.excepthook)\n"
        "import torch, argparse\n"
        "print([a is b for a, b in zip(before, after)], argparse.Namespace in "
        "torch.serialization.get_safe_globals())"
    )
    switches = ("", "off", "off:atomic-copy,allow-list")
    outputs = _together(
        {switch: [sys.executable, "-c", code] for switch in switches},
        **{switch: {"FAIRSEQ_EXT_PATCHES": switch} for switch in switches},
    )
    outputs = {switch: out.strip() for switch, out in outputs.items()}
    assert outputs == {
        "": "[False, False, False, False] True",
        "off": "[True, True, True, True] False",
        "off:atomic-copy,allow-list": "[False, True, False, False] False",
    }


def test_every_row_names_an_attribute_that_exists_and_why():
    names = [p.name for p in fairseq_changes.PATCHES] + [g.name for g in fairseq_changes.GONE]
    assert len(names) == len(set(names))
    for patch in fairseq_changes.PATCHES:
        assert patch.why and patch.since and patch.serves, patch.name
        assert "No hook: " in patch.why or "Hook: " in patch.why, (
            f"{patch.name}: say which hook is missing"
        )
        if not patch.target.startswith("fairseq_cli."):  # those exist once their command runs
            for owner, attribute in fairseq_changes._owners(patch.target):
                assert hasattr(owner, attribute), patch.target


def test_no_row_replaces_a_module_object_or_shadows_a_builtin():
    """Every row changes a function (or a method of fairseq's), ``sys.excepthook`` (Python's hook)
    or calls torch's allow-list: in each command module, the attribute a row names is there before
    the plugin changes it (not a builtin a module would shadow), and is no module."""
    code = (
        "import builtins, inspect, sys\n"
        "import fairseq_cli.generate, fairseq_cli.interactive, fairseq_cli.train\n"
        "from fairseq_ext import fairseq_changes\n"
        "for p in fairseq_changes.PATCHES:\n"
        "    for owner, attribute in fairseq_changes._owners(p.target):\n"
        "        value = inspect.getattr_static(owner, attribute, vars(builtins).get(attribute))\n"
        "        print(p.name, inspect.ismodule(value), getattr(builtins, attribute, None) is "
        "value)\n"
    )
    out = _together({"check": [sys.executable, "-c", code]})["check"].splitlines()
    assert sorted({line.split()[0] for line in out}) == sorted(
        p.name for p in fairseq_changes.PATCHES
    )
    assert all(line.split()[1:] == ["False", "False"] for line in out), out


def test_checkpoints_from_before_the_task_state_record_are_still_read():
    record = {"source": ["a"], "target": ["b"]}
    assert (
        recorded_dictionaries({RECORD_KEY: record, "task_state": {}}) == record
    )  # saved before the move
    assert recorded_dictionaries({"task_state": {RECORD_KEY: record}}) == record
    assert recorded_dictionaries({"task_state": {}}) is None


def _block(text: str, markers: tuple[str, str]) -> str:
    start, end = markers
    assert text.count(start) == 1 and text.count(end) == 1, f"one {start} and one {end}"
    return text[text.index(start) + len(start) : text.index(end)].strip("\n") + "\n"


def test_docs_show_the_table_and_the_readme_links_it():
    assert _block(PAGE.read_text(encoding="utf-8"), TABLE) == fairseq_changes.table(), (
        "docs/fairseq-patches.md is stale: python -m tests.test_fairseq_patches"
    )
    assert "(docs/fairseq-patches.md)" in README.read_text(encoding="utf-8")


def write() -> None:
    text = PAGE.read_text(encoding="utf-8")
    start, end = TABLE
    head, tail = text[: text.index(start) + len(start)], text[text.index(end) :]
    PAGE.write_text(f"{head}\n{fairseq_changes.table()}{tail}", encoding="utf-8")


if __name__ == "__main__":
    write()

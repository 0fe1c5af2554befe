"""Whom the changes of ``fairseq_changes`` serve is decided from the task at hand, never from the
command line (``fairseq_ext.fairseq_changes.patch_scope``): the same training through
``fairseq-train`` and through ``fairseq-hydra-train`` (the task in a config file, no ``--task``
anywhere) gets the same changes, and fairseq's own ``translation`` through ``fairseq-hydra-train``
gets none of them; a rank that fairseq spawns knows its command's task; with no task at hand the
changes serve."""

from __future__ import annotations

import socket
import subprocess
import sys

from tests.conftest import USER_DIR, cli_env, run

DEAD_START = "2026-01-01 00:00:00 UTC"
# a tiny unilm_seq2seq (its model is fairseq's dataclass path, which fairseq-hydra-train needs)
# and fairseq's own translation, both 2 updates; {save} and {data} are filled in
OPTIONS = {
    "unilm_seq2seq": {
        "task": {"_name": "unilm_seq2seq", "source_lang": "en", "target_lang": "de"},
        "model": {
            "_name": "unilm_transformer_tiny",
            "attention_mask": "prefix",
            "encoder_layers": 1,
            "encoder_embed_dim": 32,
            "encoder_ffn_embed_dim": 64,
            "encoder_attention_heads": 2,
        },
        "criterion": {"_name": "label_smoothed_cross_entropy", "label_smoothing": 0.1},
    },
    "translation": {
        "task": {"_name": "translation", "source_lang": "en", "target_lang": "de"},
        "model": {
            "_name": "transformer",
            "encoder_layers": 1,
            "decoder_layers": 1,
            "encoder_embed_dim": 32,
            "decoder_embed_dim": 32,
            "encoder_ffn_embed_dim": 64,
            "decoder_ffn_embed_dim": 64,
            "encoder_attention_heads": 2,
            "decoder_attention_heads": 2,
        },
        "criterion": {"_name": "cross_entropy"},
    },
}
COMMON = {
    "common": {
        "user_dir": USER_DIR,
        "cpu": True,
        "seed": 1,
        "log_format": "simple",
        "no_progress_bar": True,
    },
    "dataset": {"max_tokens": 2000, "num_workers": 0},
    "optimization": {"max_update": 2, "lr": [0.0005]},
    "optimizer": {"_name": "adam"},
    "lr_scheduler": {"_name": "fixed"},
}


def _yaml(value, indent: str = "") -> str:
    """``value`` (dicts of scalars, lists and dicts) as YAML."""
    lines = []
    for key, item in value.items():
        if isinstance(item, dict):
            lines += [f"{indent}{key}:", _yaml(item, indent + "  ")]
        else:
            text = (
                "true"
                if item is True
                else "[" + ", ".join(map(str, item)) + "]"
                if isinstance(item, list)
                else item
            )
            lines.append(f"{indent}{key}: {text}")
    return "\n".join(lines)


def _flags(value: dict) -> list[str]:
    """The same options as ``fairseq-train`` flags (``--arch`` for the model's ``_name``)."""
    flags = []
    for group, options in value.items():
        for key, item in options.items():
            if key == "_name":
                flags += [{"model": "--arch"}.get(group, f"--{group.replace('_', '-')}"), item]
            elif key == "data":
                continue
            elif item is True:
                flags.append(f"--{key.replace('_', '-')}")
            else:
                flags += [
                    f"--{key.replace('_', '-')}",
                    ",".join(map(str, item)) if isinstance(item, list) else item,
                ]
    return [str(f) for f in flags]


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _save_dir_left_by_a_killed_run(save):
    """A ``--save-dir`` as a killed training leaves it: its ``train.lock`` (a pid that is gone) and
    fairseq's ``.pt.tmp``; and ``checkpoint_best.pt`` a hard link of ``witness``: a copy over it in
    place (fairseq's) writes ``witness`` too, one that renames (the plugin's) does not. There is no
    ``checkpoint_last.pt``, so the training starts from update 0."""
    save.mkdir()
    (save / "train.lock").write_text(f"{_dead_pid()} {socket.gethostname()} {DEAD_START}\n")
    (save / "checkpoint_1_9.pt.tmp").write_bytes(b"half")
    (save / "witness").write_bytes(b"witness")
    (save / "checkpoint_best.pt").hardlink_to(save / "witness")


def _changes_seen(save, stderr: str) -> dict:
    return {
        "lock taken over": f"fairseq_ext: took over {save / 'train.lock'} from process" in stderr
        and not (save / "train.lock").exists(),
        "leftover removed": not (save / "checkpoint_1_9.pt.tmp").exists()
        and f"fairseq_ext: removed {save / 'checkpoint_1_9.pt.tmp'}" in stderr,
        "copy renamed into place": (save / "witness").read_bytes() == b"witness",
    }


def _train(command: str, task: str, data, folder) -> dict:
    save = folder / f"{command}-{task}"
    _save_dir_left_by_a_killed_run(save)
    # update 2 is saved as checkpoint_1_2.pt, then copied over checkpoint_best.pt
    saving = {"checkpoint": {"save_dir": save, "save_interval_updates": 2}}
    options = {**COMMON, **OPTIONS[task], **saving}
    options["task"] = {**options["task"], "data": data}
    if command == "fairseq-train":
        proc = run(["fairseq-train", data, *_flags(options)])
    else:
        config = folder / f"{task}.yaml"
        config.write_text(_yaml(options) + "\n", encoding="utf-8")
        proc = run(
            ["fairseq-hydra-train", "--config-dir", folder, "--config-name", config.stem],
            fresh=True,
            cwd=folder,
        )
    assert "num_updates 2" in proc.stdout + proc.stderr, proc.stderr[-3000:]
    return _changes_seen(save, proc.stderr)


def test_fairseq_train_and_hydra_train_apply_the_same_changes(tiny_data, tmp_path):
    every = {"lock taken over": True, "leftover removed": True, "copy renamed into place": True}
    assert _train("fairseq-train", "unilm_seq2seq", tiny_data, tmp_path) == every
    assert _train("fairseq-hydra-train", "unilm_seq2seq", tiny_data, tmp_path) == every
    # fairseq's own task, in a config file with the plugin as its user_dir: fairseq's behaviour
    assert _train("fairseq-hydra-train", "translation", tiny_data, tmp_path) == {
        k: False for k in every
    }


SCOPE = """
import os, pickle, sys
from fairseq_ext import plugin
from fairseq_ext.fairseq_changes import patch_scope
plugin.load()
sys.argv = ["fairseq-train", "--task", "cmlm_hybrid"]  # read by nothing
print(patch_scope.serves())  # no task at hand: the one default
for task in ("translation", "cmlm_hybrid"):
    with patch_scope.serving(task):
        print(task, patch_scope.serves(), patch_scope.serves("cmlm_hybrid"),
              patch_scope.serves("translation"))
    os.environ["FAIRSEQ_EXT_PATCH_ALL"] = "1"
    with patch_scope.serving(task):
        print(task, "all", patch_scope.serves())
    os.environ["FAIRSEQ_EXT_PATCH_ALL"] = ""
try:
    with patch_scope.serving("translation"):
        raise KeyboardInterrupt
except KeyboardInterrupt as exc:
    print(patch_scope.task_of(exc), patch_scope.serves(patch_scope.task_of(exc)))
from fairseq.tasks import TASK_REGISTRY
patch_scope.training(TASK_REGISTRY["translation"])
print("training", patch_scope.serves())
from fairseq_ext.fairseq_changes import cli_help
print(cli_help.help_served(None, ["data", "--arch", "hi_cmlm_transformer_tiny"]),
      cli_help.help_served(None, ["data", "--task", "translation"]))
"""


def test_the_scope_is_the_task_at_hand_and_never_the_command_line():
    proc = subprocess.run(
        [sys.executable, "-c", SCOPE], capture_output=True, text=True, env=cli_env()
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == [
        "True",
        "translation False True False",
        "translation all True",
        "cmlm_hybrid True True False",
        "cmlm_hybrid all True",
        "translation False",
        "training False",
        "True False",
    ]


SPAWNED = """
import multiprocessing, sys
from fairseq_ext.fairseq_changes import patch_scope
from tests.helpers.scope_probe import served_after_loading

if __name__ == "__main__":
    # pickles main, as torch's spawn does
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        print(*(pool.apply(patch_scope.ForTask(served_after_loading, task))
                for task in ("cmlm_hybrid", "translation")))
"""


def test_a_rank_that_fairseq_spawns_knows_its_commands_task(tmp_path):
    program = tmp_path / "spawned.py"
    program.write_text(SPAWNED, encoding="utf-8")
    proc = subprocess.run([sys.executable, program], capture_output=True, text=True, env=cli_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["True", "False"]

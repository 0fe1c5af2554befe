"""Safe checkpoint loading: the exact allow-list, refusal of foreign globals (without running
them, in zip checkpoints, raw pickles and torch's legacy format), clear errors for truncated
files, random bytes and folders (corrupt, not malicious), and the weights-only export."""

import argparse
import os
import pickle
import random
import re
import sys

import pytest
import torch
from fairseq import checkpoint_utils

from fairseq_ext.checkpoints import (
    SAFE_CHECKPOINT_GLOBALS,
    pickled_globals,
    safe_load,
    unsafe_globals,
)
from fairseq_ext.checkpoints.__main__ import main as checkpoints_main
from fairseq_ext.checkpoints.loading import CorruptCheckpointError, UnsafeCheckpointError
from tests.conftest import ROOT, generate_args, run, train_args

NAMESPACE = "argparse.Namespace"
NUMPY_GLOBALS = {
    "numpy.ndarray",
    "numpy.dtype",
    "numpy.dtypes.Int64DType",
    "numpy._core.multiarray._reconstruct",
    "numpy.core.multiarray._reconstruct",
}

MODEL = (
    ROOT / "examples" / "quickstart" / "model"
)  # its folder holds the dictionaries generate reads


def _loads_with(path, allowed) -> bool:
    """Does ``torch.load(weights_only=True)`` accept ``path`` with exactly ``allowed``?"""
    registered = torch.serialization.get_safe_globals()
    torch.serialization.clear_safe_globals()
    try:
        with torch.serialization.safe_globals(list(allowed)):
            torch.load(str(path), map_location="cpu", weights_only=True)
        return True
    except pickle.UnpicklingError:
        return False
    finally:
        torch.serialization.add_safe_globals(registered)


def test_allow_list_is_exactly_what_plugin_checkpoints_need(tiny_data, tiny_checkpoint, tmp_path):
    """Every entry is needed by a checkpoint the plugin writes, and nothing else is."""
    run(train_args(tiny_data, tmp_path / "plain", updates=2))
    plain = tmp_path / "plain" / "checkpoint_last.pt"
    assert pickled_globals(str(plain)) == [NAMESPACE]
    assert _loads_with(plain, [argparse.Namespace])
    assert not _loads_with(plain, [])
    # --eval-bleu keeps its n-gram counts as numpy arrays in the saved metrics
    assert set(pickled_globals(str(tiny_checkpoint))) - {NAMESPACE} <= NUMPY_GLOBALS
    assert _loads_with(tiny_checkpoint, SAFE_CHECKPOINT_GLOBALS)
    for g in SAFE_CHECKPOINT_GLOBALS:
        assert not _loads_with(
            tiny_checkpoint, [x for x in SAFE_CHECKPOINT_GLOBALS if x is not g]
        ), g
    assert unsafe_globals(str(tiny_checkpoint)) == []


class _RunsCommand:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _poisoned(tiny_checkpoint, tmp_path):
    state = safe_load(str(tiny_checkpoint))
    marker = tmp_path / "code-was-executed"
    state["extra_state"]["payload"] = _RunsCommand(marker)
    path = tmp_path / "poisoned.pt"
    torch.save(state, path)
    return path, marker


def test_foreign_global_is_refused_not_executed(tiny_checkpoint, tmp_path):
    path, marker = _poisoned(tiny_checkpoint, tmp_path)
    with pytest.raises(UnsafeCheckpointError, match="system"):
        checkpoint_utils.load_checkpoint_to_cpu(str(path))
    with pytest.raises(UnsafeCheckpointError, match="refusing to load"):
        safe_load(str(path))
    assert not marker.exists()


def test_generate_refuses_foreign_checkpoint_with_one_line(tiny_data, tiny_checkpoint, tmp_path):
    path, marker = _poisoned(tiny_checkpoint, tmp_path)
    proc = run(generate_args(tiny_data, path), check=False)
    assert proc.returncode != 0
    assert "fairseq_ext: error: refusing to load" in proc.stderr and "system" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not marker.exists()


@pytest.mark.parametrize("keep", [0.5, 0.05])
def test_truncated_checkpoint_gets_clear_error(tiny_data, tiny_checkpoint, tmp_path, keep):
    data = tiny_checkpoint.read_bytes()
    path = tmp_path / "truncated.pt"
    path.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(CorruptCheckpointError, match="truncated or corrupt"):
        checkpoint_utils.load_checkpoint_to_cpu(str(path))
    proc = run(generate_args(tiny_data, path), check=False)
    assert proc.returncode != 0
    assert "fairseq_ext: error: cannot read checkpoint" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_safe_load_keeps_weights_only_on(tiny_checkpoint, monkeypatch):
    seen = {}
    real_load = torch.load

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(torch, "load", spy)
    safe_load(str(tiny_checkpoint))
    assert seen["weights_only"] is True
    assert "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD" not in os.environ
    assert not getattr(pickle, "_fairseq_ext_patched", False)


def test_safe_load_leaves_the_installed_allow_list_in_place(tiny_checkpoint):
    """Loading through the plugin must not shrink the process-wide allow-list that
    fairseq's own loader relies on (torch's safe_globals context manager would)."""
    safe_load(str(tiny_checkpoint))
    assert set(SAFE_CHECKPOINT_GLOBALS) <= set(torch.serialization.get_safe_globals())
    assert "model" in torch.load(str(tiny_checkpoint), map_location="cpu", weights_only=True)


def test_export_writes_small_loadable_checkpoint(tiny_data, tiny_checkpoint, tmp_path):
    import sys

    out = tmp_path / "small.pt"
    run([sys.executable, "-m", "fairseq_ext.checkpoints", "export", tiny_checkpoint, out, "--fp16"])
    assert out.stat().st_size < tiny_checkpoint.stat().st_size
    state = safe_load(str(out))
    assert "last_optimizer_state" not in state
    assert all(v.dtype == torch.float16 for v in state["model"].values() if v.is_floating_point())
    proc = run(generate_args(tiny_data, out, "--iter-decode-max-iter", "1"))
    assert proc.stdout.count("\nH-") + proc.stdout.startswith("H-") == 21
    inspect = run([sys.executable, "-m", "fairseq_ext.checkpoints", "inspect", out])
    assert "argparse.Namespace\tallowed" in inspect.stdout


SYSTEM = f"{os.system.__module__}.system"
INSPECT = [sys.executable, "-m", "fairseq_ext.checkpoints", "inspect"]


def _error_line(proc):
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    return proc.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("protocol", [0, 2, 5])
def test_raw_pickles_are_inspected_without_running_them(tmp_path, protocol, capsys):
    """A raw pickle (no zip archive): inspect lists its globals; export refuses a foreign one as
    unsafe and a plain one as unreadable, in one line; nothing is run."""
    marker = tmp_path / "code-was-executed"
    evil, plain = tmp_path / "evil.pkl", tmp_path / "plain.pkl"
    evil.write_bytes(pickle.dumps({"model": _RunsCommand(marker)}, protocol=protocol))
    plain.write_bytes(pickle.dumps({"model": {"w": [1.0, 2.0]}, "cfg": None}, protocol=protocol))
    assert pickled_globals(str(evil)) == [SYSTEM] and pickled_globals(str(plain)) == []
    checkpoints_main(["inspect", str(evil)])
    out = capsys.readouterr()
    assert out.out == f"{SYSTEM}\tREFUSED\n"
    assert out.err == (
        f"fairseq_ext: {evil} is not in the zip format of torch.save (a raw pickle, or torch's "
        "legacy format): these are the globals its pickles name, read without running them\n"
    )
    with pytest.raises(
        UnsafeCheckpointError, match=f"refusing to load {evil}: it pickles {SYSTEM}, which"
    ):
        checkpoints_main(["export", str(evil), str(tmp_path / "out.pt")])
    with pytest.raises(
        CorruptCheckpointError,
        match=f"cannot read checkpoint {plain}: it is a pickle that the "
        r"weights-only loader cannot read \(a raw pickle",
    ):
        checkpoints_main(["export", str(plain), str(tmp_path / "out.pt")])
    assert sorted(os.listdir(tmp_path)) == ["evil.pkl", "plain.pkl"]  # nothing run, nothing written


def test_inspect_of_a_raw_or_legacy_pickle_is_no_traceback(tmp_path):
    """The command line: torch's legacy format is listed like a raw pickle."""
    legacy = tmp_path / "legacy.pt"
    torch.save(
        {"args": argparse.Namespace(arch="x"), "model": {"w": torch.ones(2)}},
        legacy,
        _use_new_zipfile_serialization=False,
    )
    proc = run([*INSPECT, legacy])
    assert proc.stdout == f"{NAMESPACE}\tallowed\n" and "Traceback" not in proc.stderr
    evil = tmp_path / "evil.pkl"
    evil.write_bytes(pickle.dumps(_RunsCommand(tmp_path / "code-was-executed"), protocol=0))
    assert run([*INSPECT, evil]).stdout == f"{SYSTEM}\tREFUSED\n"
    assert sorted(os.listdir(tmp_path)) == ["evil.pkl", "legacy.pt"]


def _random_bytes(tmp_path, seed):
    path = tmp_path / f"random{seed}.pt"
    path.write_bytes(random.Random(seed).randbytes(4096))
    return path


RANDOM_BYTES = (
    r"it is neither a torch checkpoint \(a zip archive\) nor a pickle: corrupt, or not a "
    r"checkpoint \(\w+: .*\)\. Not malicious: it pickles no foreign global, and nothing in it was "
    r"run"
)


def test_random_bytes_are_corrupt_not_malicious_in_every_loader(tmp_path):
    for seed in range(8):
        path = _random_bytes(tmp_path, seed)
        for load in (safe_load, checkpoint_utils.load_checkpoint_to_cpu):
            with pytest.raises(
                CorruptCheckpointError, match=f"cannot read checkpoint {path}: {RANDOM_BYTES}"
            ):
                load(str(path))
        with pytest.raises(CorruptCheckpointError, match="neither a torch checkpoint"):
            checkpoints_main(["inspect", str(path)])
        with pytest.raises(CorruptCheckpointError, match=RANDOM_BYTES):
            checkpoints_main(["export", str(path), str(tmp_path / "out.pt")])
    assert not (tmp_path / "out.pt").exists()


@pytest.mark.parametrize("start", [b".", b"N.", b"K\x05."])
def test_random_bytes_that_start_with_a_few_pickle_opcodes_are_not_a_pickle(tmp_path, start):
    """Random bytes starting with pickle's STOP (one file in 256), or a tiny pickle followed by more
    random bytes, fill neither a raw pickle nor torch's legacy format (five pickles); before, every
    loader called them "a pickle that the weights-only loader cannot read"."""
    path = tmp_path / "random.pt"
    path.write_bytes(start + random.Random(0).randbytes(4096))
    for load in (safe_load, checkpoint_utils.load_checkpoint_to_cpu):
        with pytest.raises(
            CorruptCheckpointError, match=f"cannot read checkpoint {path}: {RANDOM_BYTES}"
        ):
            load(str(path))
    with pytest.raises(CorruptCheckpointError, match="neither a torch checkpoint"):
        checkpoints_main(["inspect", str(path)])
    line = _error_line(run(generate_args(MODEL, path), check=False))
    assert re.fullmatch(
        f"fairseq_ext: error: cannot read checkpoint {path}: {RANDOM_BYTES}.*", line
    ), line


def test_random_bytes_or_a_folder_as_path_is_one_line_on_the_command_line(tiny_data, tmp_path):
    path = _random_bytes(tmp_path, 0)
    assert re.fullmatch(
        f"fairseq_ext: error: cannot read checkpoint {path}: {RANDOM_BYTES}.*",
        _error_line(run(generate_args(tiny_data, path), check=False)),
    )
    assert _error_line(run([*INSPECT, path], check=False)) == (
        f"fairseq_ext: error: cannot read checkpoint {path}: it is neither a torch checkpoint (a "
        "zip archive) nor a pickle. The file is corrupt or not a checkpoint; use a checkpoint "
        "written by fairseq-train"
    )
    assert _error_line(run(generate_args(tiny_data, tmp_path), check=False)) == (
        f"fairseq_ext: error: checkpoint {tmp_path} is a folder, not a file; give a checkpoint "
        f"file in it, e.g. {tmp_path / 'checkpoint_best.pt'}"
    )

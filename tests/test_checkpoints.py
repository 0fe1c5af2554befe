"""Safe checkpoint loading: the exact allow-list, refusal of foreign globals (without running
them), clear errors for truncated files, and the weights-only export."""
import argparse
import os
import pickle

import pytest
import torch

from fairseq import checkpoint_utils
from fairseq_ext.checkpoints import (
    SAFE_CHECKPOINT_GLOBALS,
    CorruptCheckpointError,
    UnsafeCheckpointError,
    pickled_globals,
    safe_load,
    unsafe_globals,
)
from tests.conftest import generate_args, run, train_args

NAMESPACE = "argparse.Namespace"
NUMPY_GLOBALS = {"numpy.ndarray", "numpy.dtype", "numpy.dtypes.Int64DType",
                 "numpy._core.multiarray._reconstruct", "numpy.core.multiarray._reconstruct"}


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
        assert not _loads_with(tiny_checkpoint, [x for x in SAFE_CHECKPOINT_GLOBALS if x is not g]), g
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

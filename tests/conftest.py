"""Shared fixtures: a tiny binarized En-De set built from the shipped quickstart sample,
its English side binarized alone for masked LM tasks, and a tiny HI-CMLM checkpoint
trained through the real fairseq CLIs.

The tests drive fairseq in process too (its option parser, ``setup_task``, ``build_model``),
so the plugin is loaded here, once, the way Python code loads it (``fairseq_ext.plugin``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from fairseq_ext import plugin
from tests.forked_cli import ENTRY_POINTS, Zygote, python_program

plugin.load()
# `make test` runs two pytest workers on the 2 cores (pytest-xdist); one thread each, and one
# for every CLI a test starts, so that no two thread pools fight over a core.
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "quickstart" / "data"
USER_DIR = str(ROOT / "fairseq_ext")
SHARED = ROOT.parent / "shared"
BIN_DIR = str(Path(sys.executable).parent)

TINY_DIMS = [
    "--encoder-layers",
    "1",
    "--decoder-layers",
    "1",
    "--encoder-embed-dim",
    "32",
    "--decoder-embed-dim",
    "32",
    "--encoder-ffn-embed-dim",
    "64",
    "--decoder-ffn-embed-dim",
    "64",
    "--encoder-attention-heads",
    "2",
    "--decoder-attention-heads",
    "2",
]


FORKABLE = {"cwd", "input", "timeout"}  # the options of run() that a forked command honours
CLI_FIXTURES = {"spm_model", "tiny_data", "mono_data", "tiny_checkpoint"}
CLI_SIGNS = (
    "fairseq-train",
    "fairseq-generate",
    "fairseq-preprocess",
    "fairseq-interactive",
    "subprocess",
    "bash",
)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "cuda: needs a CUDA device; `make gpu-check` runs these (docs/gpu.md)"
    )
    config.addinivalue_line(
        "markers",
        "cli: starts a command line (fairseq's or a script); `make test-fast` leaves these out",
    )


def pytest_collection_modifyitems(config, items):
    """Mark ``cli`` every test that builds data through the CLIs (its fixtures) or whose module
    starts a process, so that ``make test-fast`` is the in-process subset."""
    starts_process: dict[str, bool] = {}
    for item in items:
        path = str(item.fspath)
        if path not in starts_process:
            source = Path(path).read_text(encoding="utf-8")
            starts_process[path] = any(sign in source for sign in CLI_SIGNS)
        if starts_process[path] or CLI_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.cli)


def cli_env() -> dict:
    env = dict(os.environ)
    env["PATH"] = BIN_DIR + os.pathsep + env.get("PATH", "")
    env["PYTHONWARNINGS"] = "ignore"
    env.setdefault("OMP_NUM_THREADS", "1")
    # the reproduction's scripts import reproduction.* (its drivers export the same)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


_ZYGOTE: list = []  # this worker's tests.forked_cli.Zygote, started at the first fairseq command


def forking_server() -> Zygote:
    if not _ZYGOTE:
        _ZYGOTE.append(Zygote(cli_env(), ROOT))
    return _ZYGOTE[0]


def _forked(cmd: list[str], env: dict, **kw) -> subprocess.CompletedProcess:
    scratch = Path(tempfile.mkdtemp(prefix="forked-cli-"))
    try:
        return forking_server().run(cmd, env, scratch, **kw)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _forking() -> bool:
    return os.environ.get("FAIRSEQ_EXT_TESTS_FORK", "1") != "0"


def script_env() -> dict:
    """``cli_env()`` for a script that calls fairseq's commands by name: they are forked too
    (``tests.forked_cli.Zygote.script_env``), unless ``FAIRSEQ_EXT_TESTS_FORK=0``."""
    return forking_server().script_env(cli_env()) if _forking() else cli_env()


def run(
    cmd: list[str], check: bool = True, extra_env: dict | None = None, fresh: bool = False, **kw
) -> subprocess.CompletedProcess:
    """Run a command with the venv's CLIs first on PATH; on failure show its output. fairseq's
    command lines are forked from a process that imported them once (``tests.forked_cli``),
    those a script or program calls by name too (``script_env``), and so are Python programs
    (``python -m fairseq_ext.NAME``, ``python FILE.py``, ``python -c CODE``, ``python -``), unless
    ``FAIRSEQ_EXT_TESTS_FORK=0`` or ``fresh`` (a process of its own, and so is every command it
    starts). ``extra_env``: variables added to the command's environment."""
    cmd = [str(c) for c in cmd]
    kw.pop("capture_output", None)
    kw.pop("text", None)
    env = (cli_env() if fresh or cmd[0] in ENTRY_POINTS else script_env()) | (extra_env or {})
    if (
        (cmd[0] in ENTRY_POINTS or python_program(cmd))
        and _forking()
        and not fresh
        and set(kw) <= FORKABLE
    ):
        proc = _forked(cmd, env, **kw)
    else:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
        )
    return proc


@pytest.fixture(scope="session", autouse=True)
def _close_zygote():
    yield
    for zygote in _ZYGOTE:
        zygote.close()


def load_shipped_student(dict_dir: Path):
    """``(model, task)``: the shipped quickstart student in float32, evaluation mode, its task set
    up on a folder holding only the shipped dictionary."""
    from fairseq import checkpoint_utils

    from fairseq_ext import plugin

    plugin.load()
    model_dir = ROOT / "examples" / "quickstart" / "model"
    for lang in ("en", "de"):
        (dict_dir / f"dict.{lang}.txt").write_text((model_dir / "dict.txt").read_text())
    (model,), _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(model_dir / "checkpoint.pt")], arg_overrides={"data": str(dict_dir)}
    )
    return model.eval().float(), task


def write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def read_sample(split: str, lang: str, n: int | None = None) -> list[str]:
    lines = (SAMPLE / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()
    return lines[:n] if n else lines


def save_tiny_bert(folder: Path, text: str) -> Path:
    """A random BertModel (1 layer of 32) saved as save_pretrained writes it into ``folder``, with
    a vocab.txt of ``text``'s words, every character and its ## piece (so that no word becomes
    [UNK])."""
    import transformers

    vocab_words = sorted(set(text.split()))
    chars = sorted(set("".join(vocab_words)) | set("<>[]"))
    vocab = (
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        + chars
        + [f"##{c}" for c in chars]
        + [w for w in vocab_words if w not in chars]
    )
    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    transformers.BertModel(cfg).save_pretrained(folder)
    write_lines(folder / "vocab.txt", vocab)
    return folder


@pytest.fixture(scope="session")
def spm_model(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("spm")
    write_lines(d / "train.en", read_sample("train", "en", 600))
    write_lines(d / "train.de", read_sample("train", "de", 600))
    run(
        [
            sys.executable,
            ROOT / "data_prep" / "spm.py",
            "train",
            "--model",
            d / "spm",
            "--vocab-size",
            "400",
            d / "train.en",
            d / "train.de",
        ]
    )
    return d / "spm.model"


def encode(spm: Path, src: Path, dst: Path) -> None:
    with open(src) as fin, open(dst, "w") as fout:
        subprocess.run(
            [sys.executable, str(ROOT / "data_prep" / "spm.py"), "encode", "--model", str(spm)],
            stdin=fin,
            stdout=fout,
            check=True,
        )


def binarize(
    spm: Path,
    out: Path,
    splits: dict[str, tuple[list[str], list[str]]],
    srcdict: Path | None = None,
) -> Path:
    """Encode raw ``{split: (en_lines, de_lines)}`` with ``spm`` and run fairseq-preprocess."""
    raw = out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for split, (en, de) in splits.items():
        write_lines(raw / f"{split}.raw.en", en)
        write_lines(raw / f"{split}.raw.de", de)
        for lang in ("en", "de"):
            encode(spm, raw / f"{split}.raw.{lang}", raw / f"{split}.{lang}")
    args = [
        "fairseq-preprocess",
        "-s",
        "en",
        "-t",
        "de",
        "--destdir",
        out / "bin",
        "--workers",
        "1",
        "--joined-dictionary",
    ]
    prefs = {"train": "--trainpref", "valid": "--validpref", "test": "--testpref"}
    for split in splits:
        args += [prefs.get(split, "--testpref"), raw / split]
    if srcdict is not None:
        args += ["--srcdict", srcdict]
    run(args)
    return out / "bin"


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory, spm_model) -> Path:
    out = tmp_path_factory.mktemp("tiny_data")
    return binarize(
        spm_model,
        out,
        {
            "train": (read_sample("train", "en", 400), read_sample("train", "de", 400)),
            "valid": (read_sample("valid", "en", 37), read_sample("valid", "de", 37)),
            "test": (read_sample("test", "en", 21), read_sample("test", "de", 21)),
        },
    )


@pytest.fixture(scope="session")
def mono_data(tmp_path_factory, spm_model) -> Path:
    """Monolingual English (400 training lines, 37 validation lines: not a multiple of 8),
    binarized with ``fairseq-preprocess --only-source`` for masked LM tasks."""
    out = tmp_path_factory.mktemp("mono_data")
    for split, n in (("train", 400), ("valid", 37)):
        write_lines(out / f"{split}.raw", read_sample(split, "en", n))
        encode(spm_model, out / f"{split}.raw", out / split)
    run(
        [
            "fairseq-preprocess",
            "--only-source",
            "--trainpref",
            out / "train",
            "--validpref",
            out / "valid",
            "--destdir",
            out / "bin",
            "--workers",
            "1",
        ]
    )
    return out / "bin"


def train_args(data: Path, save_dir: Path, *extra: str, updates: int = 4) -> list:
    return [
        "fairseq-train",
        data,
        "--user-dir",
        USER_DIR,
        "--task",
        "cmlm_hybrid",
        "-s",
        "en",
        "-t",
        "de",
        "--arch",
        "hi_cmlm_transformer_tiny",
        *TINY_DIMS,
        "--criterion",
        "nat_loss",
        "--optimizer",
        "adam",
        "--lr",
        "5e-4",
        "--max-tokens",
        "2000",
        "--max-update",
        str(updates),
        "--save-dir",
        save_dir,
        "--no-progress-bar",
        "--log-format",
        "simple",
        "--seed",
        "1",
        "--num-workers",
        "0",
        *extra,
    ]


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory, tiny_data) -> Path:
    save = tmp_path_factory.mktemp("tiny_ckpt")
    proc = run(
        train_args(
            tiny_data,
            save,
            "--eval-bleu",
            "--eval-bleu-args",
            '{"iter_decode_max_iter": 2, "iter_decode_with_beam": 2}',
            "--eval-bleu-remove-bpe",
            "sentencepiece",
        )
    )
    (save / "train.log").write_text(proc.stdout + proc.stderr)
    return save / "checkpoint_last.pt"


def generate_args(data: Path, ckpt: Path, *extra: str, subset: str = "test") -> list:
    return [
        "fairseq-generate",
        data,
        "--user-dir",
        USER_DIR,
        "--task",
        "cmlm_hybrid",
        "-s",
        "en",
        "-t",
        "de",
        "--path",
        ckpt,
        "--gen-subset",
        subset,
        "--batch-size",
        "16",
        *extra,
    ]


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data, or skip the test when the folder is not there."""
    p = SHARED.joinpath("data", *parts)
    if not p.exists():
        pytest.skip(f"{p} is not available (a clone without ../shared)")
    return p

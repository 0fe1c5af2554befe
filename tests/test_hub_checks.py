"""The Python API checks what the command lines check (issue 83): a model folder whose dictionary
has the checkpoint's entries in another order is refused with the line ``fairseq-interactive``
gives for it, and ``passes`` beyond ``MAX_PASSES`` is refused before anything decodes (a
million passes never returned), in the API and in ``fairseq-generate``."""

import shutil
import time
from argparse import Namespace

import pytest

from fairseq_ext import hub
from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.generation.decoding_options import MAX_PASSES
from fairseq_ext.hub.loading import SHIPPED
from tests.conftest import USER_DIR, run

SHIPPED_MODEL = SHIPPED / "hi-cmlm-multi30k-en-de"


@pytest.fixture(scope="module")
def reordered(tmp_path_factory):
    """A copy of the shipped model folder whose dictionaries swap two entries: the same size."""
    folder = tmp_path_factory.mktemp("reordered") / "model"
    shutil.copytree(SHIPPED_MODEL, folder)
    for lang in ("en", "de"):
        path = folder / f"dict.{lang}.txt"
        lines = path.read_text(encoding="utf-8").splitlines()
        lines[10], lines[11] = lines[11], lines[10]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def test_a_reordered_dictionary_is_refused_as_fairseq_interactive_refuses_it(reordered):
    with pytest.raises(FairseqExtError) as refused:
        hub.from_pretrained(reordered)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(
        "dictionary mismatch: the source dictionary of the data is not the one "
        f"{reordered / 'checkpoint.pt'} was trained with (the same 6008 entries in another order"
    )
    proc = run(
        [
            "fairseq-interactive",
            reordered,
            "--user-dir",
            USER_DIR,
            "--task",
            "cmlm_hybrid",
            "-s",
            "en",
            "-t",
            "de",
            "--path",
            reordered / "checkpoint.pt",
            "--input",
            "-",
        ],
        check=False,
        input="A dog runs.\n",
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    # the same line; the command adds where the checkpoint was trained (its saved --data)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("fairseq_ext: error:")]
    assert len(errors) == 1 and errors[0].startswith(f"fairseq_ext: error: {message}")


def test_passes_beyond_the_maximum_are_refused_at_once():
    model = hub.from_pretrained("hi-cmlm-multi30k-en-de")
    start = time.perf_counter()
    with pytest.raises(FairseqExtError, match=f"^translate: passes must be at most {MAX_PASSES}, "):
        model.translate("A dog runs.", passes=10**6)
    with pytest.raises(FairseqExtError, match=r"^--iter-decode-max-iter must be in \[0, 252\]"):
        model.translate("A dog runs.", iter_decode_max_iter=MAX_PASSES)
    assert time.perf_counter() - start < 5
    assert model.translate("A dog runs.", passes=MAX_PASSES) != ""
    with pytest.raises(FairseqExtError, match=r"^--iter-decode-max-iter must be in \[0, 252\]"):
        model.task.build_generator(model.models, Namespace(iter_decode_max_iter=10**6))

"""Importing the package registers nothing; registering is importing ``fairseq_ext.tasks`` and
``fairseq_ext.models``, as fairseq's ``--user-dir fairseq_ext`` does (in any import order: also
after ``fairseq_ext.masking`` or the hub, which fairseq's own ``import_user_module`` would skip) and
as ``fairseq_ext.plugin.load()`` does from Python, any number of times, and it applies
``fairseq_changes.install()``. ``import fairseq_ext.masking`` imports torch, not fairseq. Each
case runs in a fresh interpreter."""

import subprocess
import sys

import pytest

from tests.conftest import ROOT, USER_DIR, cli_env

STATE = """
import sys

import pytest
from fairseq import checkpoint_utils
from fairseq.criterions import CRITERION_REGISTRY
from fairseq.file_io import PathManager
from fairseq.models import ARCH_MODEL_REGISTRY
from fairseq.tasks import TASK_REGISTRY

def state():  # imports nothing of the plugin: fairseq skips a --user-dir that is imported
    return ["cmlm_hybrid" in TASK_REGISTRY, "prophetnet_tiny" in ARCH_MODEL_REGISTRY,
            "ngram_language_loss" in CRITERION_REGISTRY,
            getattr(checkpoint_utils.load_checkpoint_to_cpu, "fairseq_ext_patch", None)
            == "checked-loading",
            getattr(PathManager.copy, "fairseq_ext_patch", None) == "atomic-copy",
            getattr(sys.excepthook, "__module__", None)
            == "fairseq_ext.fairseq_changes.one_line_errors"]
"""


def python(code: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=cli_env()
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip()


def test_masking_imports_torch_only():
    assert (
        python(
            "import fairseq_ext.masking, sys\nassert 'fairseq' not in sys.modules, sorted(m for m "
            "in sys.modules if m.startswith('fairseq'))\nassert 'torch' in sys.modules\nprint('ok')"
        )
        == "ok"
    )


def test_the_package_masks_and_hub_import_where_fairseq_cannot_be_imported():
    """``sys.modules['fairseq'] = None`` makes every import of fairseq fail, as without fairseq."""
    out = python(
        "import sys\nsys.modules['fairseq'] = None\nimport fairseq_ext, fairseq_ext.masking, "
        "fairseq_ext.hub\nfrom fairseq_ext.masking import ATTENTION_VARIANTS, predicates\nimport "
        "torch\nlower_triangle = predicates.causal(None, None, torch.arange(3)[:, None], "
        "torch.arange(3))\nprint(sorted(ATTENTION_VARIANTS), lower_triangle.sum().item())"
    )
    assert out.splitlines()[-1] == "['causal', 'permutation', 'prefix'] 6"


def test_import_changes_nothing_and_load_registers_and_patches():
    out = python(
        "import fairseq_ext, fairseq_ext.masking\n" + STATE + "print(state())\n"
        "from fairseq_ext import plugin\n"
        "plugin.load()\n"
        "print(state())\n"
        "plugin.load()\n"
        "print(state())"
    )
    assert (
        out.splitlines()
        == ["[False, False, False, False, False, False]"]
        + ["[True, True, True, True, True, True]"] * 2
    )


def test_user_dir_loads_the_plugin_as_the_command_line_tools_do():
    """fairseq's option parsing imports ``--user-dir`` (``utils.import_user_module``)."""
    out = python(
        STATE + "from fairseq import options\n"
        "print(state())\n"
        "args = options.parse_args_and_arch(options.get_training_parser(), ['data', '--user-dir', "
        f"{USER_DIR!r},"
        " '--task', 'cmlm_hybrid', '--arch', 'hi_cmlm_transformer_tiny', '--criterion', "
        "'nat_loss'])\n"
        "print(state(), args.hybrid_strategy)"
    )
    assert out.splitlines() == [
        "[False, False, False, False, False, False]",
        "[True, True, True, True, True, True] fence_replace",
    ]


def test_any_order_registers_once():
    """Modules first, then ``load()``, then ``--user-dir``: fairseq would raise on a second
    registration of a name, so a clean run is the check."""
    out = python(
        STATE + "import fairseq_ext.models, fairseq_ext.criterions\n"
        "print(state())\n"
        "import fairseq_ext.tasks\n"
        "from fairseq_ext import plugin\n"
        "plugin.load(); plugin.load()\n"
        "from fairseq import options\n"
        "args = options.parse_args_and_arch(options.get_training_parser(), ['data', '--user-dir', "
        f"{USER_DIR!r},"
        " '--task', 'translation_prophetnet', '--arch', 'prophetnet_tiny', '--criterion', "
        "'ngram_language_loss'])\n"
        "print(state(), args.arch)"
    )
    assert out.splitlines() == [
        "[False, True, True, False, False, False]",
        "[True, True, True, True, True, True] prophetnet_tiny",
    ]


FAIRSEQ_TRAIN_HELP = f"""
from fairseq.tasks import TASK_REGISTRY
from fairseq_cli import train
sys.argv = ['fairseq-train', 'data', '--user-dir', {USER_DIR!r}, '--task', 'cmlm_hybrid',
            '--arch', 'hi_cmlm_transformer_tiny', '--help']
try:
    train.cli_main()
except SystemExit as stop:
    print('cmlm_hybrid' in TASK_REGISTRY, 'exit', stop.code)
"""


@pytest.mark.parametrize(
    "first",
    [
        "import fairseq_ext\nassert 'fairseq' not in sys.modules\n",
        "import fairseq_ext.masking\nassert 'fairseq' not in sys.modules\n",
        "import fairseq_ext.hub\nassert 'fairseq' not in sys.modules\n",
        "import fairseq, fairseq_ext\n",
        "import fairseq, fairseq_ext.masking\n",
    ],
    ids=["package-first", "masking-first", "hub-first", "fairseq-first", "fairseq-then-masking"],
)
def test_user_dir_registers_whatever_was_imported_first(first):
    """fairseq's ``import_user_module`` skips a package already in ``sys.modules``; the plugin's
    step after it (the ``user-dir`` row of ``fairseq_changes``) registers anyway.
    fairseq-train's main, in process."""
    out = python("import sys\n" + first + FAIRSEQ_TRAIN_HELP).splitlines()
    assert "  --hybrid-strategy {all_mask,all_copied,weighted_sum,fence_replace}" in out, out[-20:]
    assert out[-1] == "True exit 0"


def test_user_dir_registers_when_asked_again_after_the_masks():
    """The same ``--user-dir`` twice (fairseq remembers it) and fairseq imported before the masks:
    one registration, the options parsed both times."""
    parse = (
        "options.parse_args_and_arch(options.get_training_parser(), ['data', '--user-dir', "
        f"{USER_DIR!r}, '--task', 'unilm_seq2seq', '--arch', 'unilm_transformer_tiny'])"
    )
    out = python(
        "from fairseq import options, utils\nimport fairseq_ext.masking\n"
        f"print({parse}.task, {parse}.arch, utils.import_user_module.fairseq_ext_patch)"
    )
    assert out.splitlines()[-1] == "unilm_seq2seq unilm_transformer_tiny user-dir"


def test_plain_fairseq_train_registers():
    proc = subprocess.run(
        ["fairseq-train", "data", "--user-dir", USER_DIR, "--task", "cmlm_hybrid", "--help"],
        capture_output=True,
        text=True,
        env=cli_env(),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "  --noise {random_mask,full_mask,no_noise}" in proc.stdout.splitlines()


def test_fairseqs_from_pretrained_with_user_dir_after_import_fairseq_ext():
    """docs/python-api.md: ``user_dir=`` the package's folder, in a process that imported it."""
    out = python(
        "import os, fairseq_ext\nfrom fairseq.models.nat import CMLMNATransformerModel\nhub = "
        "CMLMNATransformerModel.from_pretrained(\n    "
        f"{str(ROOT / 'examples' / 'quickstart' / 'model')!r}, checkpoint_file='checkpoint.pt',\n  "
        "  user_dir=os.path.dirname(fairseq_ext.__file__))\nprint(type(hub.task).__name__, "
        "type(hub.models[0]).__name__)"
    )
    assert out.splitlines()[-1] == "CMLMHybridTask HiCMLMTransformerModel"

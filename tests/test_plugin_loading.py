"""Importing the package changes nothing; registering is importing ``fairseq_ext.tasks`` and
``fairseq_ext.models``, as fairseq's ``--user-dir fairseq_ext`` does and as
``fairseq_ext.plugin.load()`` does from Python, in any order and any number of times, and it
applies ``fairseq_patches.install()``. ``import fairseq_ext.masking`` imports torch, not
fairseq. Each case runs in a fresh interpreter."""
import subprocess
import sys

from tests.conftest import USER_DIR, cli_env

STATE = """
import sys
from fairseq import checkpoint_utils
from fairseq.criterions import CRITERION_REGISTRY
from fairseq.file_io import PathManager
from fairseq.models import ARCH_MODEL_REGISTRY
from fairseq.tasks import TASK_REGISTRY

def state():  # imports nothing of the plugin: fairseq skips a --user-dir that is imported
    return ["cmlm_hybrid" in TASK_REGISTRY, "prophetnet_tiny" in ARCH_MODEL_REGISTRY,
            "ngram_language_loss" in CRITERION_REGISTRY,
            getattr(checkpoint_utils.load_checkpoint_to_cpu, "fairseq_ext_patch", None) == "checked-loading",
            getattr(PathManager.copy, "fairseq_ext_patch", None) == "atomic-copy",
            getattr(sys.excepthook, "__module__", None) == "fairseq_ext.errors"]
"""


def python(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip()


def test_masking_imports_torch_only():
    assert python("import fairseq_ext.masking, sys\n"
                  "assert 'fairseq' not in sys.modules, sorted(m for m in sys.modules if m.startswith('fairseq'))\n"
                  "assert 'torch' in sys.modules\n"
                  "print('ok')") == "ok"


def test_import_changes_nothing_and_load_registers_and_patches():
    out = python("import fairseq_ext, fairseq_ext.masking\n" + STATE +
                 "print(state())\n"
                 "from fairseq_ext import plugin\n"
                 "plugin.load()\n"
                 "print(state())\n"
                 "plugin.load()\n"
                 "print(state())")
    assert out.splitlines() == ["[False, False, False, False, False, False]"] + ["[True, True, True, True, True, True]"] * 2


def test_user_dir_loads_the_plugin_as_the_command_line_tools_do():
    """fairseq's option parsing imports ``--user-dir`` (``utils.import_user_module``)."""
    out = python(STATE + "from fairseq import options\n"
                 "print(state())\n"
                 f"args = options.parse_args_and_arch(options.get_training_parser(), ['data', '--user-dir', {USER_DIR!r},"
                 " '--task', 'cmlm_hybrid', '--arch', 'hi_cmlm_transformer_tiny', '--criterion', 'nat_loss'])\n"
                 "print(state(), args.hybrid_strategy)")
    assert out.splitlines() == ["[False, False, False, False, False, False]",
                                "[True, True, True, True, True, True] fence_replace"]


def test_any_order_registers_once():
    """Modules first, then ``load()``, then ``--user-dir``: fairseq would raise on a second
    registration of a name, so a clean run is the check."""
    out = python(STATE + "import fairseq_ext.models, fairseq_ext.criterions\n"
                 "print(state())\n"
                 "import fairseq_ext.tasks\n"
                 "from fairseq_ext import plugin\n"
                 "plugin.load(); plugin.load()\n"
                 "from fairseq import options\n"
                 f"args = options.parse_args_and_arch(options.get_training_parser(), ['data', '--user-dir', {USER_DIR!r},"
                 " '--task', 'translation_prophetnet', '--arch', 'prophetnet_tiny', '--criterion', 'ngram_language_loss'])\n"
                 "print(state(), args.arch)")
    assert out.splitlines() == ["[False, True, True, False, False, False]",
                                "[True, True, True, True, True, True] prophetnet_tiny"]

"""examples/scaling_out.sh: every family's multi-GPU and multi-node command lines are valid.
No GPU here, so each printed command (DRY_RUN=1) goes through the real parsers in process:
torchrun's own argument parser, then fairseq-train's (``options.parse_args_and_arch``, which
exits on an unknown option or a bad choice), and the distributed settings fairseq reads are
checked. The cpu-gloo recipe uses the options that test_reliability.py runs for real."""

import os
import shlex
import subprocess

import pytest
from fairseq import options
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from torch.distributed.run import get_args_parser as torchrun_parser

from tests.conftest import ROOT, USER_DIR, cli_env
from tests.test_reliability import GLOO

SCRIPT = ROOT / "examples" / "scaling_out.sh"
FAMILIES = ["hi_cmlm", "prophetnet", "posmask", "unilm", "permutation_lm"]
MODES = ["gpus", "torchrun", "multinode", "torchrun-multinode", "cpu-gloo"]
ENV = {
    "DRY_RUN": "1",
    "GPUS": "8",
    "NNODES": "2",
    "NODE_RANK": "1",
    "MASTER_ADDR": "10.0.0.1",
    "MASTER_PORT": "29511",
    "NPROC": "3",
}


def printed_commands(family, mode, *extra):
    proc = subprocess.run(
        ["bash", str(SCRIPT), family, mode, "data-bin/x", *extra],
        env=cli_env() | ENV,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    return [shlex.split(line) for line in proc.stdout.splitlines()]


def fairseq_cfg(argv):
    args = options.parse_args_and_arch(options.get_training_parser(), argv)
    return args, convert_namespace_to_omegaconf(args).distributed_training


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("family", FAMILIES)
def test_every_command_line_parses(family, mode):
    commands = printed_commands(family, mode, "--update-freq", "2")
    assert len(commands) == (3 if mode == "cpu-gloo" else 1)
    for rank, argv in enumerate(commands):
        if argv[0] == "torchrun":
            launcher = torchrun_parser().parse_args(argv[1:])
            assert os.path.basename(launcher.training_script) == "fairseq-train"
            assert launcher.nproc_per_node == "8"
            argv = launcher.training_script_args
            if mode == "torchrun":
                assert launcher.standalone
            else:
                assert (launcher.nnodes, launcher.rdzv_backend, launcher.rdzv_endpoint) == (
                    "2",
                    "c10d",
                    "10.0.0.1:29511",
                )
        else:
            assert argv[0] == "fairseq-train"
            argv = argv[1:]
        assert argv[:3] == ["data-bin/x", "--user-dir", USER_DIR]
        args, dist = fairseq_cfg(argv)
        assert args.update_freq == [2]  # extra options reach fairseq-train
        assert args.find_unused_parameters == (family == "unilm" and mode != "cpu-gloo")
        if mode == "cpu-gloo":
            assert args.cpu and all(option in argv for option in GLOO)
            assert (
                dist.ddp_backend,
                dist.distributed_backend,
                dist.distributed_world_size,
                dist.distributed_rank,
                dist.distributed_init_method,
            ) == ("legacy_ddp", "gloo", 3, rank, "tcp://127.0.0.1:29511")
            continue
        assert (dist.ddp_backend, dist.distributed_backend) == ("c10d", "nccl")
        assert dist.distributed_world_size == {"gpus": 8, "torchrun": 8}.get(mode, 16)
        if mode == "multinode":
            assert dist.distributed_init_method == "tcp://10.0.0.1:29511"
            assert dist.distributed_rank == 8  # this node's first rank: NODE_RANK x GPUS
        else:  # fairseq finds torchrun's environment (env://) or spawns one process per GPU
            assert dist.distributed_init_method is None


def test_unknown_family_or_mode_is_refused():
    for family, mode in (("bert", "gpus"), ("unilm", "slurm")):
        proc = subprocess.run(
            ["bash", str(SCRIPT), family, mode, "data"],
            env=cli_env() | ENV,
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 2 and "error: unknown" in proc.stderr

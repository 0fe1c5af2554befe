"""``fairseq-train`` in which ``--bf16`` means bfloat16 on the GPU.

fairseq 0.12's option parser turns every ``--bf16`` into ``--tpu`` as well
(``fairseq/options.py: parse_args_and_arch``), and its ``Trainer`` then asks ``torch_xla`` for
a TPU: plain ``fairseq-train --bf16`` stops with ``'NoneType' object has no attribute
'xla_device'`` on a GPU or a CPU. This entry point parses the command line with fairseq's own
parser, clears that ``tpu`` (nothing here runs on a TPU) and then runs fairseq's training
``main`` exactly as ``fairseq_cli.train.cli_main`` does; every other option means what it means
to ``fairseq-train``.

    python -m reproduction.gpu.fairseq_train DATA --user-dir fairseq_ext --bf16 ...
"""

from __future__ import annotations


def parse_training_args(argv: list[str] | None = None):
    """fairseq's training options from ``argv`` (``sys.argv`` by default), ``tpu`` cleared."""
    from fairseq import options

    args = options.parse_args_and_arch(options.get_training_parser(), argv)
    args.tpu = False
    return args


def main(argv: list[str] | None = None) -> None:
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.distributed import utils as distributed_utils
    from fairseq_cli import train  # first: it sets up logging as fairseq-train does

    cfg = convert_namespace_to_omegaconf(parse_training_args(argv))
    distributed_utils.call_main(cfg, train.main)


if __name__ == "__main__":
    main()

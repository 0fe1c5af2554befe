"""``python -m fairseq_ext.checkpoints``: what a checkpoint pickles, and a weights-only copy.

python -m fairseq_ext.checkpoints inspect CKPT   # globals a checkpoint (or a raw pickle) pickles
python -m fairseq_ext.checkpoints export CKPT OUT [--fp16]   # weights-only copy"""

from __future__ import annotations

import argparse
import os
import sys
import zipfile

from fairseq_ext.fairseq_changes import quiet

if __name__ == "__main__":  # before the imports below import fairseq
    quiet.hush_command(sys.argv[1:])

from fairseq_ext.checkpoints.loading import export_weights, pickled_globals, unsafe_globals  # noqa: E402
from fairseq_ext.common.errors import note  # noqa: E402
from fairseq_ext.fairseq_changes.one_line_errors import install_cli_excepthook  # noqa: E402

USAGE = __doc__


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m fairseq_ext.checkpoints",
        description=USAGE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("inspect", help="list the pickled globals of a checkpoint")
    i.add_argument("checkpoint")
    e = sub.add_parser("export", help="write a weights-only copy")
    e.add_argument("checkpoint")
    e.add_argument("output")
    e.add_argument("--fp16", action="store_true", help="store floating-point weights in fp16")
    for command in (i, e):
        command.add_argument("--verbose", action="store_true", help=quiet.VERBOSE_HELP)
    args = p.parse_args(argv)
    if args.cmd == "inspect":
        found = pickled_globals(args.checkpoint)
        if not zipfile.is_zipfile(args.checkpoint):
            note(
                f"{args.checkpoint} is not in the zip format of torch.save (a raw pickle, or "
                "torch's legacy format): these are the globals its pickles name, read without "
                "running them"
            )
        bad = unsafe_globals(args.checkpoint)
        for g in found:
            print(f"{g}\t{'REFUSED' if g in bad else 'allowed'}")
    else:
        export_weights(args.checkpoint, args.output, fp16=args.fp16)
        print(f"wrote {args.output} ({os.path.getsize(args.output) / 1e6:.1f} MB)")


if __name__ == "__main__":
    install_cli_excepthook()
    main()

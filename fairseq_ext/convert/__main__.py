"""``python -m fairseq_ext.convert``: published checkpoints in and out.

    python -m fairseq_ext.convert from-transformers FOLDER OUT
        A save_pretrained folder of BERT (BertModel / BertForMaskedLM, e.g. MiniLM) or of
        ProphetNetForConditionalGeneration (e.g. microsoft/prophetnet-large-uncased), chosen by
        config.json's model_type -> OUT/model.pt and OUT/dict.txt, the tokenizer files (so that
        fairseq_ext.hub.from_pretrained(OUT) reads text), and the fairseq options that build the
        same model (printed, and saved in OUT/options.txt). The checkpoint records OUT's absolute
        path as its data folder: fairseq's load_model_ensemble_and_task loads it on its own.
    python -m fairseq_ext.convert to-transformers CHECKPOINT OUT [--dict DICT] [--vocab FOLDER]
        A prophetnet checkpoint -> a save_pretrained folder. --vocab: the folder it was converted
        from (or the converted folder, which holds a copy of its tokenizer files), whose
        vocabulary order and tokenizer files are restored, so AutoTokenizer.from_pretrained reads
        OUT; without it the model's own dictionary (DICT, default dict.txt beside the checkpoint)
        becomes vocab.txt, for reference (no tokenizer for it is written).

Every problem is one line on stderr and exit status 1. ``--verbose`` also shows fairseq's INFO
log and Hydra's deprecation warnings, hidden by default.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.fairseq_changes import quiet


def _from_transformers(a) -> dict:
    from fairseq_ext.convert import bert, prophetnet
    from fairseq_ext.convert.transformers_folder import read_config, read_folder

    converters = {"bert": bert.convert, "prophetnet": prophetnet.convert_from_transformers}
    model_type = read_config(a.folder).get(
        "model_type", ""
    )  # before the weights and the vocabulary
    if model_type not in converters:
        raise FairseqExtError(
            f"{a.folder}: model_type {model_type!r} is not supported; this converts "
            f"{' and '.join(converters)} checkpoints"
        )
    info = converters[model_type](read_folder(a.folder), Path(a.out))
    (Path(a.out) / "options.txt").write_text(" ".join(info["options"]) + "\n")
    return info


def _to_transformers(a) -> dict:
    from fairseq_ext.convert.prophetnet import export_to_transformers

    return export_to_transformers(Path(a.checkpoint), Path(a.out), a.dict, a.vocab)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m fairseq_ext.convert",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--verbose", action="store_true", help=quiet.VERBOSE_HELP)
    f = sub.add_parser(
        "from-transformers",
        parents=[common],
        help="BERT or ProphetNet folder -> fairseq checkpoint + dict.txt",
    )
    f.add_argument("folder", type=Path)
    f.add_argument("out", type=Path)
    t = sub.add_parser(
        "to-transformers", parents=[common], help="prophetnet checkpoint -> save_pretrained folder"
    )
    t.add_argument("checkpoint", type=Path)
    t.add_argument("out", type=Path)
    t.add_argument(
        "--dict", type=Path, help="the model's dict.txt (default: beside the checkpoint)"
    )
    t.add_argument(
        "--vocab", type=Path, help="the transformers folder the model was converted from"
    )
    a = p.parse_args(argv)
    quiet.hush(a.verbose)  # before fairseq is imported
    logging.basicConfig(
        format="%(levelname)s %(name)s: %(message)s", level=logging.INFO, stream=sys.stderr
    )
    try:
        info = _from_transformers(a) if a.command == "from-transformers" else _to_transformers(a)
    except FairseqExtError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(info, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m fairseq_ext.convert``: published checkpoints in and out.

    python -m fairseq_ext.convert from-transformers FOLDER OUT [--force]
        A save_pretrained folder of BERT (BertModel / BertForMaskedLM, e.g. MiniLM) or of
        ProphetNetForConditionalGeneration (e.g. microsoft/prophetnet-large-uncased), chosen by
        config.json's model_type -> OUT/model.pt and OUT/dict.txt, the tokenizer files (so that
        fairseq_ext.hub.from_pretrained(OUT) reads text), and the fairseq options that build the
        same model (printed, and saved in OUT/options.txt). The checkpoint records OUT's absolute
        path as its data folder: fairseq's load_model_ensemble_and_task loads it on its own.
    python -m fairseq_ext.convert to-transformers CHECKPOINT OUT [--dict D] [--vocab F] [--force]
        A prophetnet checkpoint -> a save_pretrained folder. --vocab F: the folder it was converted
        from (or the converted folder, which holds a copy of its tokenizer files), whose
        vocabulary order and tokenizer files are restored, so AutoTokenizer.from_pretrained reads
        OUT; without it the model's own dictionary (D, default dict.txt beside the checkpoint)
        becomes vocab.txt, for reference (no tokenizer for it is written).

OUT is never the folder read nor inside it (nor, for to-transformers, the checkpoint's folder);
an OUT that already holds a model (model.pt, config.json, weights, tokenizer files, ...) is
refused unless --force; a conversion that fails removes the files it added. Every problem is
one line on stderr and exit status 1. ``--verbose`` also shows fairseq's INFO log and Hydra's
deprecation warnings, hidden by default.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from fairseq_ext.common.cli import command_parser
from fairseq_ext.common.errors import FairseqExtError, require
from fairseq_ext.convert.transformers_folder import TOKENIZER_FILES, WEIGHT_FILES
from fairseq_ext.convert.vocabulary import DICTIONARIES
from fairseq_ext.fairseq_changes import quiet

FROM_WRITES = ("model.pt", *DICTIONARIES, "options.txt", "conversion.json", *TOKENIZER_FILES)
TO_WRITES = ("config.json", "model.safetensors", *TOKENIZER_FILES)
MODEL_FILES = sorted({*FROM_WRITES, *TO_WRITES, *WEIGHT_FILES})


def _convert(a) -> dict:
    from fairseq_ext.convert import bert, prophetnet
    from fairseq_ext.convert.transformers_folder import read_config, read_folder

    if a.command == "to-transformers":
        return prophetnet.export_to_transformers(a.checkpoint, a.out, a.dict, a.vocab)
    converters = {
        "bert": (bert.check_config, bert.convert),
        "prophetnet": (prophetnet.check_config, prophetnet.convert_from_transformers),
    }
    config = read_config(a.folder)  # before the weights and the vocabulary
    model_type = config.get("model_type", "")
    if not isinstance(model_type, str) or model_type not in converters:
        raise FairseqExtError(
            f"{a.folder}: model_type {model_type!r} is not supported; this converts "
            f"{' and '.join(converters)} checkpoints"
        )
    check, convert = converters[model_type]
    check(config, a.folder)
    info = convert(read_folder(a.folder), a.out)
    (a.out / "options.txt").write_text(" ".join(info["options"]) + "\n")
    return info


def check_out(out: Path, force: bool, read: list[Path], beside: Path | None = None) -> None:
    """Refuse an OUT that is a file, is or is inside a folder read (``read``), equals ``beside``,
    or holds a model (``MODEL_FILES``) unless ``force``."""
    where = out.resolve()
    require(not out.exists() or out.is_dir(), f"{out} is a file; OUT is the folder to write")
    for folder in read:
        require(
            where != folder.resolve() and folder.resolve() not in where.parents,
            f"OUT {out} is {'inside ' if where != folder.resolve() else ''}the folder read "
            f"({folder}); give another folder",
        )
    require(
        beside is None or where != beside.resolve(),
        f"OUT {out} is the checkpoint's folder; give another folder",
    )
    found = [name for name in MODEL_FILES if (out / name).exists()]
    require(
        force or not found,
        f"{out} already holds a model ({', '.join(found)}); give a new or empty folder, or add "
        "--force to overwrite it",
    )


def _remove_new_files(out: Path, before: set[str] | None, names) -> None:
    """After a failed conversion, remove the files of ``names`` that OUT did not hold
    (``before``), and OUT if it was made."""
    for name in names:
        if name not in (before or ()) and (out / name).is_file():
            (out / name).unlink()
    if before is None and out.is_dir() and not any(out.iterdir()):
        out.rmdir()


def main(argv: list[str] | None = None) -> int:
    p = command_parser("python -m fairseq_ext.convert", __doc__)
    sub = p.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--verbose", action="store_true", help=quiet.VERBOSE_HELP)
    common.add_argument(
        "--force", action="store_true", help="overwrite the model that OUT already holds"
    )
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
    before = {p.name for p in a.out.iterdir()} if a.out.is_dir() else None
    try:
        if a.command == "from-transformers":
            check_out(a.out, a.force, [a.folder])
        else:
            check_out(a.out, a.force, [a.vocab] if a.vocab else [], a.checkpoint.parent)
        try:
            info = _convert(a)
        except BaseException:
            writes = FROM_WRITES if a.command == "from-transformers" else TO_WRITES
            _remove_new_files(a.out, before, writes)
            raise
    except FairseqExtError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(info, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

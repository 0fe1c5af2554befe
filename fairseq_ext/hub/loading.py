"""Loading a model folder (or a shipped model's name) for the Python API, on fairseq's
``hub_utils.from_pretrained`` (docs/python-api.md)."""

from __future__ import annotations

import difflib
import json
import warnings
from os import PathLike
from pathlib import Path

from fairseq_ext.common.errors import FairseqExtError, require
from fairseq_ext.common.families import hub_family, hub_offer
from fairseq_ext.common.tokenizer_check import check_coverage, load_sentencepiece, pieces
from fairseq_ext.fairseq_changes.preflight import check_model_folder, check_sentencepiece_model

SHIPPED = Path(__file__).resolve().parent / "models"
CHECKPOINT_NAMES = ("checkpoint.pt", "model.pt", "checkpoint_best.pt", "checkpoint_last.pt")
SENTENCEPIECE_FILES = ("spm.model", "sentencepiece.bpe.model")
WORDPIECE_FILES = ("tokenizer.json", "vocab.txt", "prophetnet.tokenizer")


def shipped_names() -> list[str]:
    return sorted(p.name for p in SHIPPED.iterdir() if p.is_dir()) if SHIPPED.is_dir() else []


def model_folder(model_dir) -> Path:
    """``model_dir`` as a folder: the path, or else the shipped model of that name."""
    path = Path(model_dir).expanduser()
    if not path.exists() and str(model_dir) in shipped_names():
        return SHIPPED / str(model_dir)
    return path.resolve()


def checkpoint_name(folder: Path, checkpoint_file: str | None) -> str:
    if checkpoint_file is not None:
        for name in checkpoint_file.split(":"):
            require(
                (folder / name).is_file(),
                f"{folder / name} does not exist; give checkpoint_file the name of "
                f"a checkpoint in {folder}",
            )
        return checkpoint_file
    for name in CHECKPOINT_NAMES:
        if (folder / name).is_file():
            return name
    raise FairseqExtError(
        f"{folder} holds none of {', '.join(CHECKPOINT_NAMES)}; give checkpoint_file=NAME"
    )


def tokenizer_options(folder: Path) -> dict:
    """fairseq's ``bpe`` options for the tokenizer files in ``folder`` (empty if none)."""
    for name in SENTENCEPIECE_FILES:
        if (folder / name).is_file():
            return {"bpe": "sentencepiece", "sentencepiece_model": str(folder / name)}
    if any((folder / name).is_file() for name in WORDPIECE_FILES):
        return {"bpe": "wordpiece", "wordpiece_tokenizer": str(folder)}
    return {}


def refuse_unknown_overrides(cfg, overrides: dict) -> None:
    """A ``TypeError`` for keywords that are no option of the configuration."""
    known = set(cfg) | {key for group in cfg.values() if hasattr(group, "keys") for key in group}
    unknown = sorted(set(overrides) - known)
    if unknown:
        close = sorted({m for k in unknown for m in difflib.get_close_matches(k, known, n=3)})
        raise TypeError(
            f"from_pretrained() got unknown keyword(s) {', '.join(unknown)}: no fairseq option of "
            f"this checkpoint has that name{' (close: ' + ', '.join(close) + ')' if close else ''}"
            "; give options by their fairseq name with _ for -, e.g. beam, batch_size, bpe"
        )


def warn_untrained_head(folder: Path, interface) -> None:
    """Warn once when ``folder`` was converted from a BERT checkpoint without an MLM head."""
    from fairseq_ext.convert.bert import CONVERSION_FILE
    from fairseq_ext.hub.encoder import PositionMaskedHubInterface

    record = folder / CONVERSION_FILE
    if not isinstance(interface, PositionMaskedHubInterface) or not record.is_file():
        return
    if json.loads(record.read_text(encoding="utf-8")).get("mlm_head") == "new":
        warnings.warn(
            f"{folder} was converted from a checkpoint without an MLM head (e.g. a BertModel "
            "such as all-MiniLM-L6-v2): its MLM head is untrained, so fill_mask's fillings are "
            "meaningless until it is trained (--task position_masked_lm); classify after "
            "fine-tuning is not affected",
            stacklevel=4,
        )


def check_dictionary_record(path: Path, loaded: dict) -> None:
    """The dictionaries the task read from the folder are those the checkpoint records."""
    from fairseq_ext.checkpoints.checks import check_dictionaries

    task, name = loaded["task"], loaded["args"].task._name
    # the merged state itself: the plugin's ``state_dict()`` would record the folder's dictionaries
    merged = task.state.state_dict if getattr(task, "state", None) is not None else {}
    state = {"task_state": merged, "cfg": {"task": {"_name": name}}}
    check_dictionaries(str(path), state, task, name)


def _interface(cfg, task, models, overrides: dict):
    """The interface ``families.hub_family`` names for the checkpoint, built with its
    ``DEFAULT_GENERATION`` where ``overrides`` does not give the option."""
    from fairseq_ext.hub.encoder import PositionMaskedHubInterface
    from fairseq_ext.hub.generation import HICMLMHubInterface, Seq2SeqHubInterface

    name = cfg.task._name
    arch = getattr(cfg.model, "arch", None) or getattr(cfg.model, "_name", "")
    family = hub_family(name, str(arch))
    if family is None:
        raise FairseqExtError(
            f"the checkpoint was trained with --task {name} (--arch {arch}), which has no Python "
            f"API here; the API serves {hub_offer()}"
        )
    interface = {
        c.__name__: c for c in (HICMLMHubInterface, Seq2SeqHubInterface, PositionMaskedHubInterface)
    }[family.hub_interface]
    for option, value in getattr(interface, "DEFAULT_GENERATION", {}).items():
        if option not in overrides:
            cfg.generation[option] = value
    if interface is PositionMaskedHubInterface:
        require(
            len(models) == 1,
            "the position-masked encoder's API takes one checkpoint, not an ensemble",
        )
        return interface(cfg, task, models[0])
    return interface(cfg, task, models)


def from_pretrained(
    model_dir,
    checkpoint_file: str | None = None,
    data_name_or_path: str = ".",
    device=None,
    verbose: bool = False,
    int8_decoding: bool = False,
    length_offset: int | None = None,
    length_offset_ramp: int | None = None,
    remove_repeats: int | None = None,
    **overrides,
):
    """Load ``model_dir`` on ``device`` (default CPU) in evaluation mode, behind its family's
    interface. ``overrides`` are fairseq options by name (tokenizer, generation defaults,
    batching, model options); ``int8_decoding``, ``length_offset``, ``length_offset_ramp`` and
    ``remove_repeats``: ``cmlm_hybrid`` only (unset: the interface's ``DEFAULT_DECODING``);
    ``verbose`` shows fairseq's log and warnings (docs/python-api.md)."""
    from fairseq_ext import plugin
    from fairseq_ext.fairseq_changes import quiet

    quiet.hush(verbose)  # before fairseq is imported
    from fairseq import hub_utils

    plugin.load()
    # torch imports this (some 480 modules, 0.5 s and more) the first time an attention layer
    # checks its padding mask; importing it here makes the first call as fast as later ones
    import torch.fx.experimental.symbolic_shapes  # noqa: F401

    if not isinstance(model_dir, (str, PathLike)):
        raise TypeError(
            f"from_pretrained: model_dir must be a folder's path (str or Path), got "
            f"{type(model_dir).__name__} {model_dir!r:.60}"
        )
    if checkpoint_file is not None and not isinstance(checkpoint_file, str):
        raise TypeError(
            "from_pretrained: checkpoint_file must be a file name (str), got "
            f"{checkpoint_file!r:.60}"
        )
    folder = model_folder(model_dir)
    options = {**({} if "bpe" in overrides else tokenizer_options(folder)), **overrides}
    data = folder / data_name_or_path if data_name_or_path.startswith(".") else data_name_or_path
    shipped = ", ".join(shipped_names())
    check_model_folder(
        str(folder),
        str(data),
        f"give the folder that holds the checkpoint, or the name of a model the package ships "
        f"({shipped})",
    )
    sentencepiece_model = None
    if options.get("bpe") == "sentencepiece":
        sentencepiece_model = options.get("sentencepiece_model")
        check_sentencepiece_model(sentencepiece_model)
    name = checkpoint_name(folder, checkpoint_file)
    if options.get("bpe") == "wordpiece":  # registers --bpe wordpiece (needs tokenizers)
        from fairseq_ext.wordpiece import bpe  # noqa: F401
    if sentencepiece_model is not None and Path(sentencepiece_model).is_file():
        load_sentencepiece(str(sentencepiece_model), "sentencepiece_model")
    try:
        loaded = hub_utils.from_pretrained(
            str(folder), checkpoint_file=name, data_name_or_path=data_name_or_path, **options
        )
    except FileNotFoundError as exc:
        missing = exc.filename or str(exc)
        raise FairseqExtError(
            f"loading {folder / name} needs {missing}, which does not exist; put it there "
            "(the dictionaries the model was trained with, or its tokenizer), or give "
            "data_name_or_path the data folder that holds the dictionaries"
        ) from None
    refuse_unknown_overrides(loaded["args"], overrides)
    check_dictionary_record(folder / name, loaded)
    interface = _interface(loaded["args"], loaded["task"], loaded["models"], overrides).eval()
    given = {
        "length_offset": length_offset,
        "length_offset_ramp": length_offset_ramp,
        "remove_repeats": remove_repeats,
    }
    if hasattr(interface, "check_integer"):  # the range of length_offset: check_config below
        for key in ("length_offset_ramp", "remove_repeats"):
            interface.check_integer("from_pretrained", key, given[key])
    decoding = {"int8_decoding": int8_decoding, **getattr(interface, "DEFAULT_DECODING", {})}
    decoding.update((k, v) for k, v in given.items() if v is not None)  # given wins
    for option, value in decoding.items():
        if value:
            require(
                hasattr(interface.task.cfg, option),
                f"{option}: only mask-predict checkpoints (--task cmlm_hybrid) take it; "
                f"{folder / name} was trained with --task {loaded['args'].task._name}",
            )
            setattr(interface.task.cfg, option, value)
    if any(decoding.values()):  # against the task's dataclass (fairseq's register_task)
        from fairseq_ext.common.config_fields import check_config

        check_config(interface.task.cfg, getattr(type(interface.task), "__dataclass"))
    for model in getattr(interface, "models", []):  # as build_generator sets it; now, not in a call
        for key in ("length_offset", "length_offset_ramp"):
            if hasattr(getattr(model, "decoder", None), key):
                setattr(model.decoder, key, getattr(interface.task.cfg, key))
    if int8_decoding:  # now, not lazily in a call: calls in several threads share the model
        from fairseq_ext.generation.int8 import quantize_for_decoding

        for model in interface.models:
            quantize_for_decoding(model)
    if sentencepiece_model is not None:
        check_coverage(
            pieces(interface.bpe.sp),
            interface.task.source_dictionary.symbols,
            str(sentencepiece_model),
            f"the dictionary of {folder}",
            lambda message: warnings.warn(message, stacklevel=5),
        )
    warn_untrained_head(folder, interface)
    return interface.to(device) if device is not None else interface

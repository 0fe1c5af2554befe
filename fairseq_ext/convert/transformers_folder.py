"""A folder as transformers' ``save_pretrained`` writes it (``config.json``, the weights, the
tokenizer's vocabulary), read without transformers and unpickling only tensors, and written."""

from __future__ import annotations

import json
import pickle
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List

import torch
from torch import Tensor

from fairseq_ext.checkpoints import unsafe_globals
from fairseq_ext.common.errors import FairseqExtError, require

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
VOCABULARY_FILES = ("vocab.txt", "prophetnet.tokenizer")
BERT_SPECIALS = {
    f"{role}_token": f"[{role.upper()}]" for role in ("cls", "pad", "sep", "unk", "mask")
}


@dataclass
class TransformersFolder:
    """A ``save_pretrained`` folder: config, weights, vocabulary in id order, special tokens."""

    path: Path
    config: dict
    state: Dict[str, Tensor]
    vocab: List[str]
    specials: Dict[str, str] = field(default_factory=dict)


def _load_weights(path: Path) -> Dict[str, Tensor]:
    for name in WEIGHT_FILES:
        file = path / name
        if not file.exists():
            continue
        if name.endswith(".safetensors"):
            from safetensors.torch import load_file

            try:
                return load_file(str(file))
            except Exception as exc:  # safetensors raises its own error types
                raise FairseqExtError(
                    f"{file} is not a readable safetensors file ({exc}); "
                    "save the model again with save_pretrained"
                ) from None
        try:
            state = torch.load(file, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError:
            try:  # the globals it pickles beyond the checkpoint allow-list
                names = ", ".join(unsafe_globals(str(file)))
            except FairseqExtError:  # neither a zip archive nor a pickle
                names = ""
            if not names:  # random bytes, a pickle torch cannot read: corrupt, not foreign
                raise FairseqExtError(
                    f"{file} is not a readable torch checkpoint (truncated or corrupt; nothing in "
                    "it was run); save the model again with save_pretrained"
                ) from None
            raise FairseqExtError(
                f"{file} pickles objects other than tensors ({names}; nothing was run); "
                "only weights-only checkpoints are loaded: re-save it with "
                "save_pretrained(..., safe_serialization=True)"
            ) from None
        except Exception as exc:  # random bytes fail with IndexError, KeyError, RuntimeError...
            raise FairseqExtError(
                f"{file} is not a readable torch checkpoint ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0] if str(exc) else ''}); save the model again with "
                "save_pretrained"
            ) from None
        require(
            isinstance(state, dict) and all(isinstance(v, Tensor) for v in state.values()),
            f"{file} is not a state dict of tensors; save the model with save_pretrained",
        )
        return state
    raise FairseqExtError(
        f"{path} has no {' or '.join(WEIGHT_FILES)}; give the folder that save_pretrained wrote"
    )


def load_vocab(path: Path) -> List[str]:
    """The tokens in id order, as transformers' tokenizer reads them."""
    for name in VOCABULARY_FILES:
        if (path / name).exists():
            return (path / name).read_text(encoding="utf-8").rstrip("\n").split("\n")
    if (path / "tokenizer.json").exists():
        model = json.loads((path / "tokenizer.json").read_text(encoding="utf-8")).get("model", {})
        require(
            model.get("type") == "WordPiece" and isinstance(model.get("vocab"), dict),
            f"{path / 'tokenizer.json'} is not a WordPiece tokenizer; BERT-family and ProphetNet "
            "checkpoints use one (give a folder with vocab.txt)",
        )
        by_id = sorted(model["vocab"].items(), key=lambda kv: kv[1])
        require(
            [i for _, i in by_id] == list(range(len(by_id))),
            f"{path / 'tokenizer.json'}: the vocabulary ids are not 0 .. {len(by_id) - 1}",
        )
        return [token for token, _ in by_id]
    raise FairseqExtError(
        f"{path} has none of {', '.join(VOCABULARY_FILES)}, tokenizer.json; save the tokenizer "
        "next to the model (tokenizer.save_pretrained(folder))"
    )


def load_specials(path: Path) -> Dict[str, str]:
    specials = dict(BERT_SPECIALS)
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        file = path / name
        if file.exists():
            for key, value in json.loads(file.read_text(encoding="utf-8")).items():
                if key in BERT_SPECIALS:
                    specials[key] = value["content"] if isinstance(value, dict) else value
    return specials


def read_config(path) -> dict:
    path = Path(path)
    require(
        path.is_dir(),
        f"{path} is not a folder; give the folder that save_pretrained wrote "
        "(config.json, model.safetensors or pytorch_model.bin, the tokenizer files)",
    )
    require(
        (path / "config.json").exists(),
        f"{path} has no config.json; give the folder that save_pretrained wrote",
    )
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FairseqExtError(
            f"{path / 'config.json'} is not JSON text ({exc}); save the model again with "
            "save_pretrained"
        ) from None
    require(
        isinstance(config, dict),
        f"{path / 'config.json'} holds a JSON {type(config).__name__}, not an object of settings; "
        "save the model again with save_pretrained",
    )
    return config


def require_settings(config: dict, path, sizes, numbers, heads) -> None:
    """Each of ``sizes`` a positive integer, each of ``numbers`` present a number >= 0, and
    ``hidden_size`` divisible by each of ``heads``."""
    file = Path(path) / "config.json"
    for key in sizes:
        require(key in config, f"{file} has no {key}; give the config.json saved with this model")
        value = config[key]
        require(
            type(value) is int and value > 0,
            f"{file}: {key} is {value!r}, not a positive integer; give the config.json saved "
            "with this model",
        )
    for key in numbers:
        value = config.get(key, 0)
        require(
            type(value) in (int, float) and value >= 0,
            f"{file}: {key} is {value!r}, not a number >= 0",
        )
    for key in heads:
        require(
            config["hidden_size"] % config[key] == 0,
            f"{path}: hidden_size {config['hidden_size']} is not divisible by {key} {config[key]}",
        )


def read_folder(path) -> TransformersFolder:
    """Read a ``save_pretrained`` folder; each problem is one line naming the file and the fix."""
    path = Path(path)
    config = read_config(path)
    state = _load_weights(path)
    vocab = load_vocab(path)
    size = config.get("vocab_size")
    require(
        size == len(vocab),
        f"vocabulary mismatch: {path} lists {len(vocab)} tokens but config.json says "
        f"vocab_size {size}; give the tokenizer files saved with this model",
    )
    return TransformersFolder(path, config, state, vocab, load_specials(path))


TOKENIZER_FILES = (
    *VOCABULARY_FILES,
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)


def copy_tokenizer(source: Path, destination: Path) -> List[str]:
    copied = [name for name in TOKENIZER_FILES if (Path(source) / name).exists()]
    for name in copied:
        shutil.copyfile(Path(source) / name, Path(destination) / name)
    return copied


def write_folder(path, config: dict, state: dict, vocab: list, specials: dict, tokenizer_from=None):
    """Write ``config.json``, ``model.safetensors`` (tied tensors copied) and the tokenizer: the
    files of ``tokenizer_from`` when given, else ``vocab``'s ``vocab.txt``."""
    from safetensors.torch import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    config = json.dumps(config, indent=2, sort_keys=True)
    (path / "config.json").write_text(config + "\n", encoding="utf-8")
    save_file(
        {k: v.detach().contiguous().clone() for k, v in state.items()},
        str(path / "model.safetensors"),
        metadata={"format": "pt"},
    )
    copied = copy_tokenizer(tokenizer_from, path) if tokenizer_from else []
    if not set(copied) & {*VOCABULARY_FILES, "tokenizer.json"}:
        (path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    if "special_tokens_map.json" not in copied:
        (path / "special_tokens_map.json").write_text(
            json.dumps(specials, indent=2) + "\n", encoding="utf-8"
        )

"""Every numeric option the plugin registers, out of range, is one clear error at build time.

The options are found by introspection, not listed by hand: the numeric fields the plugin
declares in its model, task and criterion configs (a model's ``config_fields.model_config``: the
dataclass it is registered with, or the options it adds to its fairseq parent; the one its
``add_args`` puts on the command line). ``OUT_OF_RANGE`` gives each an out-of-range value and the
message it must produce; ``test_every_numeric_option_has_an_out_of_range_case`` fails when an
option has no entry (a new option cannot slip through) or an entry names an option that no
longer exists. Each case builds the task, model and criterion in process, exactly as
``fairseq-train`` does (``tests/helpers/families.py``), and expects ``FairseqExtError`` naming
the option. fairseq's own decoding options are checked where the plugin's tasks build their
generators (``DECODING_CASES``)."""

import argparse
import dataclasses
import typing

import pytest
from fairseq.criterions import CRITERION_DATACLASS_REGISTRY, CRITERION_REGISTRY
from fairseq.dataclass import FairseqDataclass
from fairseq.dataclass.configs import GenerationConfig
from fairseq.models import MODEL_DATACLASS_REGISTRY, MODEL_REGISTRY
from fairseq.tasks import TASK_DATACLASS_REGISTRY, TASK_REGISTRY

from fairseq_ext.common.config_fields import model_config
from fairseq_ext.common.errors import FairseqExtError
from tests.helpers.families import build, dict_folder

PLUGIN = "fairseq_ext."

# (kind, registered name, option) -> (family to build, [(value, message fragment), ...])
OUT_OF_RANGE = {
    ("task", "prophetnet_denoising", "--mask-ratio"): (
        "prophetnet_denoising",
        [
            ("0", "--mask-ratio must be in (0, 1]"),
            ("1.5", "--mask-ratio must be in (0, 1]"),
            ("nan", "--mask-ratio must be in (0, 1]"),
        ],
    ),
    ("task", "prophetnet_denoising", "--block-size"): (
        "prophetnet_denoising",
        [("0", "--block-size must be >= 1"), ("-64", "--block-size must be >= 1")],
    ),
    ("task", "prophetnet_denoising", "--max-source-positions"): (
        "prophetnet_denoising",
        [
            ("1", "--max-source-positions must be >= 2"),
            ("0", "--max-source-positions must be >= 2"),
        ],
    ),
    ("task", "prophetnet_denoising", "--max-target-positions"): (
        "prophetnet_denoising",
        [
            ("1", "--max-target-positions must be >= 2"),
            ("-1", "--max-target-positions must be >= 2"),
        ],
    ),
    ("task", "position_masked_lm", "--position-mask-prob"): (
        "posmask",
        [
            ("1.5", "--position-mask-prob must be in [0, 1]"),
            ("-0.1", "--position-mask-prob must be in [0, 1]"),
            ("nan", "--position-mask-prob must be in [0, 1]"),
        ],
    ),
    ("task", "position_masked_lm", "--position-keep-prob"): (
        "posmask",
        [
            ("-0.5", "--position-keep-prob must be in [0, 1]"),
            ("0.99", "--position-keep-prob + --position-random-prob must be <= 1"),
        ],
    ),
    ("task", "position_masked_lm", "--position-random-prob"): (
        "posmask",
        [
            ("2", "--position-random-prob must be in [0, 1]"),
            ("0.99", "--position-keep-prob + --position-random-prob must be <= 1"),
        ],
    ),
    ("task", "permutation_lm", "--tokens-per-sample"): (
        "permutation_lm",
        [("2", "--tokens-per-sample must be >= 3"), ("0", "--tokens-per-sample must be >= 3")],
    ),
    ("criterion", "ngram_language_loss", "--ngram-gamma"): (
        "prophetnet",
        [
            ("0", "--ngram-gamma must be a finite number > 0"),
            ("-1", "--ngram-gamma must be a finite number > 0"),
            ("inf", "--ngram-gamma must be a finite number > 0"),
            ("nan", "--ngram-gamma must be a finite number > 0"),
        ],
    ),
    ("criterion", "ngram_language_loss", "--label-smoothing"): (
        "prophetnet",
        [
            ("1", "--label-smoothing must be in [0, 1)"),
            ("-0.1", "--label-smoothing must be in [0, 1)"),
            ("nan", "--label-smoothing must be in [0, 1)"),
        ],
    ),
    ("criterion", "position_masked_lm", "--position-loss-weight"): (
        "posmask",
        [
            ("-1", "--position-loss-weight must be a finite number >= 0"),
            ("inf", "--position-loss-weight must be a finite number >= 0"),
            ("nan", "--position-loss-weight must be a finite number >= 0"),
        ],
    ),
    ("task", "cmlm_hybrid", "--length-offset"): (
        "hi_cmlm",
        [
            ("17", "--length-offset must be in [-16, 16]"),
            ("-17", "--length-offset must be in [-16, 16]"),
        ],
    ),
    ("task", "cmlm_hybrid", "--length-offset-ramp"): (
        "hi_cmlm",
        [
            ("256", "--length-offset-ramp must be in [0, 255]"),
            ("-1", "--length-offset-ramp must be in [0, 255]"),
        ],
    ),
    ("task", "cmlm_hybrid", "--remove-repeats"): (
        "hi_cmlm",
        [
            ("9", "--remove-repeats must be in [0, 8]"),
            ("-1", "--remove-repeats must be in [0, 8]"),
        ],
    ),
    ("model", "hi_cmlm_transformer", "--copy-temperature"): (
        "hi_cmlm",
        [
            ("0", "--copy-temperature must be > 0"),
            ("-0.2", "--copy-temperature must be > 0"),
            ("nan", "--copy-temperature must be > 0"),
        ],
    ),
    ("model", "hi_cmlm_transformer", "--train-copy-share"): (
        "hi_cmlm",
        [
            ("1.5", "--train-copy-share must be in [0, 1]"),
            ("-0.1", "--train-copy-share must be in [0, 1]"),
            ("nan", "--train-copy-share must be in [0, 1]"),
        ],
    ),
    ("model", "hi_cmlm_transformer", "--mask-weight"): (
        "hi_cmlm",
        [
            ("1.5", "--mask-weight must be in [0, 1]"),
            ("-0.1", "--mask-weight must be in [0, 1]"),
            ("nan", "--mask-weight must be in [0, 1]"),
        ],
    ),
    ("model", "prophetnet", "--ngram"): (
        "prophetnet",
        [
            ("0", "--ngram must be >= 1"),
            ("65", "--ngram 65 is larger than the decoder's positions table"),
        ],
    ),
    ("model", "prophetnet", "--num-buckets"): (
        "prophetnet",
        [("1", "--num-buckets must be >= 2"), ("-4", "--num-buckets must be >= 2")],
    ),
    ("model", "prophetnet", "--relative-max-distance"): (
        "prophetnet",
        [
            ("16", "--relative-max-distance must be larger than --num-buckets // 2"),
            ("0", "--relative-max-distance must be larger than --num-buckets // 2"),
        ],
    ),
    ("model", "unilm_transformer", "--encoder-layers"): (
        "unilm",
        [("0", "--encoder-layers must be >= 1")],
    ),
    ("model", "unilm_transformer", "--layernorm-eps"): (
        "unilm",
        [
            ("0", "--layernorm-eps must be > 0"),
            ("-1e-5", "--layernorm-eps must be > 0"),
            ("nan", "--layernorm-eps must be > 0"),
        ],
    ),
    ("model", "position_masked_roberta", "--layernorm-eps"): (
        "posmask",
        [("0", "--layernorm-eps must be > 0"), ("-1e-12", "--layernorm-eps must be > 0")],
    ),
    ("model", "unilm_transformer", "--encoder-embed-dim"): (
        "unilm",
        [
            ("0", "--encoder-embed-dim must be >= 1"),
            ("33", "--encoder-embed-dim 33 must be divisible by"),
        ],
    ),
    ("model", "unilm_transformer", "--encoder-ffn-embed-dim"): (
        "unilm",
        [("0", "--encoder-ffn-embed-dim must be >= 1")],
    ),
    ("model", "unilm_transformer", "--encoder-attention-heads"): (
        "unilm",
        [
            ("0", "--encoder-attention-heads must be >= 1"),
            ("3", "must be divisible by --encoder-attention-heads 3"),
        ],
    ),
    ("model", "unilm_transformer", "--max-positions"): (
        "unilm",
        [("2", "--max-positions must be >= 3")],
    ),
    ("model", "unilm_transformer", "--dropout"): (
        "unilm",
        [
            ("1", "--dropout must be in [0, 1)"),
            ("-0.1", "--dropout must be in [0, 1)"),
            ("nan", "--dropout must be in [0, 1)"),
        ],
    ),
    ("model", "unilm_transformer", "--attention-dropout"): (
        "unilm",
        [
            ("1.5", "--attention-dropout must be in [0, 1)"),
            ("nan", "--attention-dropout must be in [0, 1)"),
        ],
    ),
    ("model", "unilm_transformer", "--activation-dropout"): (
        "unilm",
        [
            ("-1", "--activation-dropout must be in [0, 1)"),
            ("nan", "--activation-dropout must be in [0, 1)"),
        ],
    ),
    # fairseq's masked_lm options that position_masked_lm validates (inherited, not its own)
    ("task", "position_masked_lm", "--mask-prob"): (
        "posmask",
        [("0", "--mask-prob must be > 0"), ("1.2", "--mask-prob must be in [0, 1]")],
    ),
    ("task", "position_masked_lm", "--leave-unmasked-prob"): (
        "posmask",
        [
            ("-0.1", "--leave-unmasked-prob must be in [0, 1]"),
            ("0.95", "--leave-unmasked-prob + --random-token-prob must be <= 1"),
        ],
    ),
    ("task", "position_masked_lm", "--random-token-prob"): (
        "posmask",
        [("1.1", "--random-token-prob must be in [0, 1]")],
    ),
    ("task", "position_masked_lm", "--tokens-per-sample"): (
        "posmask",
        [("1", "--tokens-per-sample must be >= 2"), ("-8", "--tokens-per-sample must be >= 2")],
    ),
    ("task", "position_masked_lm", "--mask-multiple-length"): (
        "posmask",
        [
            (
                "3",
                "--mask-multiple-length is a masked_lm option that position_masked_lm does not "
                "support",
            )
        ],
    ),
    ("task", "position_masked_lm", "--mask-stdev"): (
        "posmask",
        [("0.5", "--mask-stdev is a masked_lm option that position_masked_lm does not support")],
    ),
}
INHERITED = {
    ("task", "position_masked_lm", o)
    for o in (
        "--mask-prob",
        "--leave-unmasked-prob",
        "--random-token-prob",
        "--tokens-per-sample",
        "--mask-multiple-length",
        "--mask-stdev",
    )
}
# Options without a range to check, and why.
EXEMPT = {
    (
        "task",
        "prophetnet_denoising",
        "--seed",
    ): "fairseq's --seed (the field interpolates common.seed); every integer is a seed",
    (
        "task",
        "permutation_lm",
        "--seed",
    ): "fairseq's --seed (the field interpolates common.seed); every integer is a seed",
}


def _is_numeric(annotation) -> bool:
    if annotation in (int, float):
        return True
    args = set(typing.get_args(annotation)) - {type(None)}
    return typing.get_origin(annotation) is typing.Union and bool(args) and args <= {int, float}


def _dataclass_options(config) -> set[str]:
    """Numeric fields declared in the plugin's own classes of a config's MRO."""
    names = set()
    for klass in config.__mro__:
        if klass.__module__.startswith(PLUGIN) and dataclasses.is_dataclass(klass):
            names |= {
                n for n, a in klass.__dict__.get("__annotations__", {}).items() if _is_numeric(a)
            }
    return {"--" + n.replace("_", "-") for n in names}


def _add_args_options(model_cls) -> set[str]:
    def numeric(cls) -> set[str]:
        parser = argparse.ArgumentParser()
        cls.add_args(parser)
        return {
            a.option_strings[0]
            for a in parser._actions
            if a.type in (int, float) and a.option_strings
        }

    parent = next(
        b
        for b in model_cls.__mro__[1:]
        if not b.__module__.startswith(PLUGIN) and hasattr(b, "add_args")
    )
    return numeric(model_cls) - numeric(parent)


def plugin_numeric_options() -> set[tuple[str, str, str]]:
    found = set()
    for name, cls in TASK_REGISTRY.items():
        if cls.__module__.startswith(PLUGIN) and name in TASK_DATACLASS_REGISTRY:
            found |= {("task", name, o) for o in _dataclass_options(TASK_DATACLASS_REGISTRY[name])}
    for name, cls in CRITERION_REGISTRY.items():
        if cls.__module__.startswith(PLUGIN) and name in CRITERION_DATACLASS_REGISTRY:
            found |= {
                ("criterion", name, o)
                for o in _dataclass_options(CRITERION_DATACLASS_REGISTRY[name])
            }
    for name, cls in MODEL_REGISTRY.items():
        if cls.__module__.startswith(PLUGIN):
            found |= {("model", name, o) for o in _dataclass_options(model_config(cls))}
    return found


def test_every_plugin_model_has_a_dataclass_config_and_its_command_line_is_that_config():
    models = {
        name: cls for name, cls in MODEL_REGISTRY.items() if cls.__module__.startswith(PLUGIN)
    }
    assert set(models) == {
        "hi_cmlm_transformer",
        "prophetnet",
        "unilm_transformer",
        "position_masked_roberta",
    }
    for name, cls in models.items():
        config = model_config(cls)
        assert dataclasses.is_dataclass(config) and issubclass(config, FairseqDataclass), name
        assert _add_args_options(cls) == _dataclass_options(config), name
    # the model that subclasses no argparse-configured fairseq model: registered with its config
    assert MODEL_DATACLASS_REGISTRY["unilm_transformer"] is model_config(
        models["unilm_transformer"]
    )
    unilm = models["unilm_transformer"]
    assert not hasattr(unilm, "options_config") and "add_args" not in vars(unilm)
    assert {n for n, cls in models.items() if hasattr(cls, "options_config")} == set(models) - {
        "unilm_transformer"
    }
    assert not any(n in MODEL_DATACLASS_REGISTRY for n in set(models) - {"unilm_transformer"})


def test_every_numeric_option_has_an_out_of_range_case():
    found = plugin_numeric_options()
    # the introspection itself finds what it must (a guard against it finding nothing)
    assert {
        ("model", "prophetnet", "--ngram"),
        ("task", "prophetnet_denoising", "--mask-ratio"),
        ("criterion", "ngram_language_loss", "--ngram-gamma"),
    } <= found
    missing = sorted(found - set(OUT_OF_RANGE) - set(EXEMPT))
    assert not missing, f"numeric options without an out-of-range case in OUT_OF_RANGE: {missing}"
    stale = sorted((set(OUT_OF_RANGE) - INHERITED) - found) + sorted(set(EXEMPT) - found)
    assert not stale, f"entries for options the plugin no longer registers: {stale}"


CASES = [
    (key, family, value, fragment)
    for key, (family, values) in OUT_OF_RANGE.items()
    for value, fragment in values
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return dict_folder(tmp_path_factory.mktemp("dicts"), 30)


@pytest.mark.parametrize(
    "key, family, value, fragment", CASES, ids=[f"{k[1]}{k[2]}={v}" for k, _, v, _ in CASES]
)
def test_out_of_range_value_is_refused_at_build_time(folder, key, family, value, fragment):
    option = key[2]
    with pytest.raises(FairseqExtError) as caught:
        build(folder, family, f"{option}={value}")
    message = str(caught.value)
    assert option in message and fragment in message, message
    assert "\n" not in message


@pytest.mark.parametrize(
    "family",
    ["hi_cmlm", "prophetnet", "prophetnet_denoising", "posmask", "unilm", "permutation_lm"],
)
def test_defaults_build(folder, family):
    """The baseline of every case above: the same command line without the bad value builds."""
    task, model, criterion = build(folder, family)
    assert model is not None and criterion is not None


# Decoding options of the plugin's generators, refused when the task builds its generator
# (fairseq-generate, fairseq-interactive, --eval-bleu): fairseq clamps or ignores these values
# without a word (--iter-decode-with-beam -2 decodes with one length candidate) or stops on an
# assert. (family, option, value, message fragment)
BEAM_SEARCH_OUT_OF_RANGE = [
    ("--beam", 0, "--beam must be in [1, "),
    ("--beam", 1000, "--beam must be in [1, "),
    ("--nbest", 6, "--nbest must be in [1, --beam 5]"),
    ("--nbest", 0, "--nbest must be in [1, --beam 5]"),
    ("--min-len", -1, "--min-len must be >= 0"),
    ("--max-len-a", -0.5, "--max-len-a must be >= 0"),
    ("--max-len-a", float("nan"), "--max-len-a must be >= 0"),
    ("--max-len-b", -1, "--max-len-b must be >= 0"),
    ("--max-len-b", 0, "--max-len-b must be >= 0, and >= --min-len 1 when --max-len-a is 0"),
    ("--no-repeat-ngram-size", -1, "--no-repeat-ngram-size must be >= 0"),
    ("--temperature", 0.0, "--temperature must be > 0"),
    ("--temperature", -1.0, "--temperature must be > 0"),
]
DECODING_CASES = [
    ("hi_cmlm", "--iter-decode-with-beam", -2, "--iter-decode-with-beam must be >= 1"),
    ("hi_cmlm", "--iter-decode-with-beam", 0, "--iter-decode-with-beam must be >= 1"),
    ("hi_cmlm", "--iter-decode-max-iter", -1, "--iter-decode-max-iter must be in [0, 252]"),
    (
        "hi_cmlm",
        "--iter-decode-eos-penalty",
        0.5,
        "--iter-decode-eos-penalty is not used by mask-predict",
    ),
    (
        "hi_cmlm",
        "--iter-decode-eos-penalty",
        float("nan"),
        "--iter-decode-eos-penalty is not used by mask-predict",
    ),
    ("hi_cmlm", "--nbest", 2, "--nbest must be 1: mask-predict gives one hypothesis per sentence"),
] + [(family, *case) for family in ("prophetnet", "unilm") for case in BEAM_SEARCH_OUT_OF_RANGE]


@pytest.fixture(scope="module")
def built(folder):
    """Each family's (task, model) built once for the decoding cases (they build generators)."""
    families: dict[str, tuple] = {}

    def get(family: str) -> tuple:
        if family not in families:
            families[family] = build(folder, family)[:2]
        return families[family]

    return get


def _generation_config(option: str, value) -> GenerationConfig:
    """fairseq's generation options with ``option`` (a GenerationConfig field) set to ``value``."""
    return GenerationConfig(**{option[2:].replace("-", "_"): value})


@pytest.mark.parametrize(
    "family, option, value, fragment",
    DECODING_CASES,
    ids=[f"{f}{o}={v}" for f, o, v, _ in DECODING_CASES],
)
def test_out_of_range_decoding_option_is_refused_when_the_generator_is_built(
    built, family, option, value, fragment
):
    task, model = built(family)
    with pytest.raises(FairseqExtError) as caught:
        task.build_generator([model], _generation_config(option, value))
    message = str(caught.value)
    assert fragment in message and f"got {value}" in message, message
    assert "\n" not in message


@pytest.mark.parametrize(
    "family, option, value",
    [
        ("hi_cmlm", "--iter-decode-with-beam", 1),
        ("hi_cmlm", "--iter-decode-max-iter", 0),
        ("prophetnet", "--beam", 34),
        ("prophetnet", "--max-len-b", 0),
        ("unilm", "--nbest", 5),
    ],
)
def test_decoding_options_at_the_edge_of_their_range_build(built, family, option, value):
    """The baseline of the cases above: the defaults and the edge values build a generator
    (--max-len-b 0 with --max-len-a 1, the longest output as long as the source)."""
    task, model = built(family)
    assert task.build_generator([model], GenerationConfig()) is not None
    config = _generation_config(option, value)
    if option == "--max-len-b":
        config.max_len_a = 1.0
    assert task.build_generator([model], config) is not None

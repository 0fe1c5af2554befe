"""A Python API call decodes exactly as through fairseq's own ``GeneratorHubInterface.generate``
(its deep copy of the generation configuration, the task's dataset and batch iterator), while
taking neither the copy nor, for inputs that make one batch, the iterator (issue 86): many
sentences in groups of many sizes, on HI-CMLM (float and int8, several decoding options),
ProphetNet and UniLM, every output and every hypothesis's scores compared."""

import copy
import json

import pytest
import torch
from fairseq.hub_utils import GeneratorHubInterface
from omegaconf import DictConfig

from fairseq_ext import hub
from reproduction.benchmarks.hub_overhead import fairseq_generate
from tests.conftest import read_sample
from tests.test_hub import MODEL, prophetnet, quickstart, unilm  # noqa: F401  (fixtures)

SOURCES = read_sample("test", "en", 60)
# groups of 1 to 33 sentences from several places of the sample (ties of length included)
GROUPS = [SOURCES[start : start + size] for size in (1, 2, 5, 16, 17, 33) for start in (0, 27)]


def same_hypotheses(ours: list, theirs: list) -> bool:
    """Every hypothesis of every input: the same tokens, positional scores and score."""
    return len(ours) == len(theirs) and all(
        len(a) == len(b)
        and all(
            torch.equal(x["tokens"], y["tokens"])
            and torch.equal(x["positional_scores"], y["positional_scores"])
            and torch.equal(torch.as_tensor(x["score"]), torch.as_tensor(y["score"]))
            for x, y in zip(a, b)
        )
        for a, b in zip(ours, theirs)
    )


def assert_same_as_fairseq(model, method: str, options: dict) -> None:
    """``method`` on every group of ``GROUPS``, and ``generate`` on 17 sentences, as through
    fairseq's ``generate`` (``hub_overhead.fairseq_generate``)."""
    call = getattr(model, method)
    ours = [call(group, **options) for group in GROUPS]
    tokens = [model.encode(s) for s in SOURCES[:17]]
    beam = options.get("beam", model.generation_options["beam"])
    generation = {k: v for k, v in options.items() if k in model.generation_options and k != "beam"}
    our_hypotheses = model.generate(tokens, beam, **generation)
    with fairseq_generate(model):
        theirs = [call(group, **options) for group in GROUPS]
        their_hypotheses = model.generate(tokens, beam, **generation)
    assert ours == theirs
    assert same_hypotheses(our_hypotheses, their_hypotheses)
    # the sentences went through different computations (a tiny model may write alike)
    assert len({float(hypos[0]["score"]) for hypos in our_hypotheses}) > 10


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"passes": 2},
        {"passes": 4, "length_beam": 1, "strategy": "all_mask", "length_offset": 1},
        {"iter_decode_max_iter": 5, "iter_decode_force_max_iter": True},
    ],
)
def test_translate_equals_fairseqs_generate(quickstart, options):
    assert_same_as_fairseq(quickstart, "translate", options)


def test_int8_translate_equals_fairseqs_generate():
    model = hub.from_pretrained(MODEL, int8_decoding=True)
    assert_same_as_fairseq(model, "translate", {"passes": 3})


def test_batches_of_the_iterator_equal_fairseqs_generate(monkeypatch):
    """Inputs of more than one batch (``batch_size=4`` here) go through the task's iterator, as
    fairseq cuts them; up to 4 sentences are one batch, collated without it."""
    model = hub.from_pretrained(MODEL, batch_size=4)
    iterators = []
    build = model.task.get_batch_iterator
    monkeypatch.setattr(
        model.task, "get_batch_iterator", lambda **kw: iterators.append(1) or build(**kw)
    )
    model.translate(SOURCES[:4], passes=2)
    assert not iterators
    model.translate(SOURCES[:5], passes=2)
    assert iterators
    assert_same_as_fairseq(model, "translate", {"passes": 2})


@pytest.mark.parametrize("family", ["prophetnet", "unilm"])
def test_summarize_equals_fairseqs_generate(request, family, tiny_data, spm_model):
    checkpoint, _ = request.getfixturevalue(family)
    model = hub.from_pretrained(
        checkpoint.parent,
        checkpoint.name,
        str(tiny_data),
        bpe="sentencepiece",
        sentencepiece_model=str(spm_model),
    )
    options = {"beam": 3, "lenpen": 1, "max_len_b": 12, "no_repeat_ngram_size": 2}
    assert_same_as_fairseq(model, "summarize", options)
    assert_same_as_fairseq(model, "translate", {"beam": 2})


def test_a_call_copies_no_configuration_and_projects_with_one_weight(quickstart, monkeypatch):
    """No deep copy of an OmegaConf configuration in a call (fairseq's ``generate`` makes one
    per call), and the transposed output weights of the vocabulary projection are made once."""
    copies = []
    deepcopy = DictConfig.__deepcopy__
    monkeypatch.setattr(
        DictConfig, "__deepcopy__", lambda self, memo: copies.append(1) or deepcopy(self, memo)
    )
    quickstart.translate("A dog runs.", passes=2)
    weight = quickstart.projection._cache[1]
    quickstart.translate(["A cat sleeps.", "Two men play football."], passes=3)
    assert not copies and quickstart.projection._cache[1] is weight
    with fairseq_generate(quickstart):
        quickstart.translate("A dog runs.", passes=2)
    assert copies  # the counter sees fairseq's copy


def test_the_options_the_model_was_loaded_with_hold_for_every_call():
    """``from_pretrained``'s options (over ``DEFAULT_GENERATION``) are the call's defaults,
    and a call's own options do not change them."""
    model = hub.from_pretrained(MODEL, iter_decode_with_beam=1)
    assert model.generation_options["iter_decode_with_beam"] == 1
    assert model.generation_options["iter_decode_max_iter"] == 9
    before = copy.deepcopy(model.generation_options)
    model.translate("A dog runs.", passes=3, length_beam=2)
    assert model.generation_options == before
    assert model.translate("A dog runs.") == model.translate("A dog runs.", length_beam=1)


def test_a_mask_predict_generator_is_kept_per_set_of_call_options(quickstart):
    """The same options (with the same types) give the same generator; other options, or an
    equal value of another type, another one; an unhashable value one for the call alone; at
    most ``KEPT_GENERATORS`` sets are kept."""
    kept = quickstart.generator(3, {"iter_decode_max_iter": 1})
    assert quickstart.generator(3, {"iter_decode_max_iter": 1}) is kept
    assert quickstart.generator(3, {"iter_decode_max_iter": 2}) is not kept
    assert quickstart.generator(3, {"iter_decode_max_iter": True}) is not kept
    assert quickstart.generator(1, {"iter_decode_max_iter": 1}) is not kept
    unhashable = {"iter_decode_max_iter": 1, "print_alignment": []}
    assert quickstart.generator(3, unhashable) is not quickstart.generator(3, unhashable)
    for passes in range(quickstart.KEPT_GENERATORS + 5):
        quickstart.generator(3, {"iter_decode_max_iter": passes})
    assert len(quickstart.generators) <= quickstart.KEPT_GENERATORS


def test_generate_of_no_sentences_is_no_hypotheses(quickstart):
    assert quickstart.generate([], 3) == [] == GeneratorHubInterface.generate(quickstart, [], 3)


def test_the_overhead_script_writes_its_results_and_table(tmp_path):
    """``reproduction/benchmarks/hub_overhead.py`` (docs/python-api.md's table), on 2 sentences
    and 1 round: every row with its three sides, the load beside them, the table on the page."""
    from reproduction.benchmarks import hub_overhead

    out, page = tmp_path / "hub_overhead.json", tmp_path / "page.md"
    page.write_text(f"before\n{hub_overhead.START}\nold\n{hub_overhead.END}\nafter\n")
    result = hub_overhead.main(
        ["--sentences", "2", "--rounds", "1", "--out", str(out)] + ["--page", str(page)]
    )
    assert json.loads(out.read_text()) == result and len(result["rows"]) == 5
    for row in result["rows"]:
        assert set(row["cpu"]["ms_per_sentence"]) == {"decode", "call", "fairseq generate"}
    assert "load average" in result["uptime_before"] and result["cores"] >= 1
    text = page.read_text()
    assert "old" not in text and text.count("| `translate` |") == 4 and text.endswith("after\n")

"""Concurrent calls of the Python API on ONE loaded model give exactly what the same calls give one
after the other (docs/python-api.md, "Serving many users"): real threads, started together at a
barrier, each with its own sentences and options (hybrid strategy, passes, length beam, length
offset; beam; topk; return_probs), over several rounds, every output compared. Before calls
carried their own decoding state and options, two threads translating on the shipped model mixed
their outputs (issue 83). The model is left as it was loaded."""

import json
import threading

import pytest

from fairseq_ext import hub
from fairseq_ext.generation import lean_mask_predict, refinement
from fairseq_ext.generation.int8 import QUANTIZED
from tests.conftest import read_sample
from tests.test_hub import MODEL, classifier, masked_lm, prophetnet, quickstart, unilm  # noqa: F401  (fixtures)
from tests.test_hub_inputs import models  # noqa: F401  (a fixture)

ROUNDS = 3
SOURCES = read_sample("test", "en", 36)
# four calls in four threads: different sentences and options, and the first sentences twice
# (with another strategy), whose equal shapes once made one call read the other's tensors
TRANSLATE_CALLS = [
    (SOURCES[0:12], {}),
    (SOURCES[12:24], {"strategy": "all_mask", "passes": 4}),
    (SOURCES[24:36], {"length_offset": 2, "length_beam": 1, "passes": 6}),
    (SOURCES[0:12], {"strategy": "weighted_sum", "length_offset": -1, "force_passes": True}),
]


def in_threads(calls: list) -> list:
    """The results of ``calls`` (functions without arguments), each run in a thread of its own,
    all released together at a barrier; an exception of any is raised here."""
    barrier = threading.Barrier(len(calls))
    results, errors = [None] * len(calls), []

    def work(i: int) -> None:
        barrier.wait()
        try:
            results[i] = calls[i]()
        except BaseException as exc:  # handed to the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


def assert_concurrent_equals_sequential(calls: list) -> None:
    """Every output of ``calls`` run in threads, ``ROUNDS`` times, equals its sequential one."""
    sequential = [call() for call in calls]
    for _ in range(ROUNDS):
        concurrent = in_threads(calls)
        for want, got in zip(sequential, concurrent):
            assert got == want


def translate_calls(model) -> list:
    return [lambda s=s, o=o: model.translate(s, **o) for s, o in TRANSLATE_CALLS]


def test_threads_translating_on_one_model_get_their_own_outputs(quickstart):
    decoder, task = quickstart.models[0].decoder, quickstart.task
    saved = (decoder.hybrid_strategy, decoder.length_offset, task.cfg.length_offset)
    calls = translate_calls(quickstart)
    sequential = [call() for call in calls]
    # the options matter: the same sentences decode otherwise with another strategy and offset
    assert sum(a != b for a, b in zip(sequential[0], sequential[3])) >= 3
    assert_concurrent_equals_sequential(calls)
    assert (decoder.hybrid_strategy, decoder.length_offset, task.cfg.length_offset) == saved


def test_a_per_call_length_offset_equals_the_load_time_one(quickstart):
    """``translate(..., length_offset=2)`` decodes as ``from_pretrained(length_offset=2)``."""
    sentences = SOURCES[:8]
    loaded = hub.from_pretrained(MODEL, length_offset=2).translate(sentences, passes=4)
    assert quickstart.translate(sentences, passes=4, length_offset=2) == loaded
    assert quickstart.translate(sentences, passes=4, length_offset=0) != loaded


def test_per_call_options_reach_the_route_the_lean_loop_leaves(quickstart, monkeypatch):
    """A model the lean loop does not serve (``lean_mask_predict.applies`` false) decodes with
    fairseq's generator over the model's ``forward_decoder``: the call's strategy and offset
    reach the decoder there too, with the same outputs (as with ``retain_iter_history``, which
    the lean loop serves)."""
    sentences, options = SOURCES[:6], {"strategy": "all_mask", "length_offset": 2, "passes": 4}
    lean = quickstart.translate(sentences, **options)
    assert quickstart.translate(sentences, retain_iter_history=True, **options) == lean
    passes, route = [], refinement._RefinementModel.forward_decoder

    def counted(self, *args, **kwargs):
        passes.append(1)
        return route(self, *args, **kwargs)

    monkeypatch.setattr(refinement._RefinementModel, "forward_decoder", counted)
    monkeypatch.setattr(lean_mask_predict, "applies", lambda model: False)
    monkeypatch.setattr(quickstart, "generators", {})  # those kept were built for the lean loop
    assert quickstart.translate(sentences, **options) == lean and passes
    assert quickstart.translate(sentences, passes=4) != lean


def test_int8_weights_are_made_at_load_and_threads_share_them():
    """``int8_decoding``: the weights are quantised by ``from_pretrained``, not by the first call
    (two first calls in threads would both convert the shared model)."""
    model = hub.from_pretrained(MODEL, int8_decoding=True)
    assert getattr(model.models[0], QUANTIZED, False)
    assert_concurrent_equals_sequential(translate_calls(model)[:2])


@pytest.mark.parametrize("family", ["prophetnet", "unilm"])
def test_threads_summarizing_on_one_model_get_their_own_outputs(
    request, family, tiny_data, spm_model
):
    checkpoint, _ = request.getfixturevalue(family)
    model = hub.from_pretrained(
        checkpoint.parent,
        checkpoint.name,
        str(tiny_data),
        bpe="sentencepiece",
        sentencepiece_model=str(spm_model),
    )
    options = [{"beam": 4}, {"beam": 2, "lenpen": 0.6}, {"beam": 3, "max_len_b": 8}]
    calls = [
        lambda s=SOURCES[8 * i : 8 * i + 8], o=o: model.summarize(s, **o)
        for i, o in enumerate(options)
    ]
    assert_concurrent_equals_sequential(calls)


def test_threads_filling_masks_and_classifying_get_their_own_outputs(models):
    filler, classifier_ = models("fill_mask"), models("classify")
    masked = [s.replace(" a ", " a <mask> ", 1) for s in SOURCES if " a " in s][:18]
    calls = [
        lambda: filler.fill_mask(masked[:9], topk=3),
        lambda: filler.fill_mask(masked[9:], topk=5, batch_size=4),
        lambda: classifier_.classify(SOURCES[:12]),
        lambda: classifier_.classify(SOURCES[12:24], return_probs=True, batch_size=5),
    ]
    sequential = [call() for call in calls]
    for _ in range(ROUNDS):
        concurrent = in_threads(calls)
        assert concurrent[:3] == sequential[:3]
        for (label, probs), (want_label, want_probs) in zip(concurrent[3], sequential[3]):
            assert label == want_label and probs.equal(want_probs)


def test_a_call_refuses_a_model_left_in_training_mode(models):
    """A call does not switch the shared model's mode (fairseq's ``model_eval`` does, and back)."""
    model = models("classify")
    model.train()
    try:
        with pytest.raises(ValueError, match="^classify: the model is in training mode"):
            model.classify(SOURCES[:2])
    finally:
        model.eval()
    assert not model.training


def test_the_throughput_script_writes_its_results_file(tmp_path):
    """``reproduction/benchmarks/hub_threads.py`` (docs/python-api.md's numbers), on a few
    sentences: a results file with a speed per thread count, the load average beside it."""
    from reproduction.benchmarks import hub_threads

    out = tmp_path / "hub_threads.json"
    result = hub_threads.main(
        ["--sentences", "4", "--per-call", "2", "--threads", "1", "2", "--rounds", "1"]
        + ["--out", str(out)]
    )
    assert json.loads(out.read_text()) == result
    (row,) = result["rows"]
    assert set(row["sentences_per_second"]) == {"1", "2"} and row["outputs_equal_one_thread"]
    assert "load average" in result["uptime_before"] and result["cores"] >= 1

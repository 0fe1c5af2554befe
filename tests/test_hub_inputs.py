"""Every method of the Python API (``translate``, ``summarize``, ``fill_mask``, ``classify``)
returns one output per input, in order, whatever the input holds: empty and whitespace-only
inputs give an empty output (or one error naming the index), inputs longer than the model
takes give None with one warning naming their indexes and the limit (or are refused, or
truncated with a warning, on request), wrong types and unknown keywords are one clear line, and
text the vocabulary lacks is warned about."""

import sys
import warnings

import pytest

from fairseq_ext import hub
from fairseq_ext.common.errors import FairseqExtError
from tests.conftest import run

# fixtures
from tests.test_hub import MODEL, classifier, masked_lm, prophetnet, quickstart, unilm  # noqa: F401

# method, a good input, the output of an empty input
CASES = {
    "translate": ("A man is riding a bike.", ""),
    "summarize": ("A man is riding a bike.", ""),
    "fill_mask": ("A man is riding a <mask>.", []),
    "classify": ("A man is riding a bike.", None),
}


@pytest.fixture(scope="module")
def models(request, tiny_data, spm_model, mono_data):
    """method name -> a model whose interface has it (loaded on first use)."""
    loaded = {}

    def get(method: str):
        if method not in loaded:
            if method == "translate":
                loaded[method] = request.getfixturevalue("quickstart")
            elif method == "summarize":
                checkpoint, _ = request.getfixturevalue("prophetnet")
                loaded[method] = hub.from_pretrained(
                    checkpoint.parent,
                    checkpoint.name,
                    str(tiny_data),
                    bpe="sentencepiece",
                    sentencepiece_model=str(spm_model),
                )
            elif method == "fill_mask":
                loaded[method] = hub.from_pretrained(
                    request.getfixturevalue("masked_lm"),
                    "checkpoint_last.pt",
                    str(mono_data),
                    bpe="sentencepiece",
                    sentencepiece_model=str(spm_model),
                )
            else:
                folder = request.getfixturevalue("classifier")
                loaded[method] = hub.from_pretrained(
                    folder / "ft",
                    "checkpoint_last.pt",
                    str(folder / "bin"),
                    bpe="sentencepiece",
                    sentencepiece_model=str(spm_model),
                )
        return loaded[method]

    return get


def call(models, method, sentences, **kw):
    return getattr(models(method), method)(sentences, **kw)


@pytest.mark.parametrize("method", CASES)
def test_one_output_per_input_and_empty_inputs_give_empty_outputs(models, method):
    good, nothing = CASES[method]
    alone = call(models, method, good)
    assert call(models, method, ["", good, "  \t", good]) == [nothing, alone, nothing, alone]
    assert call(models, method, " ") == nothing
    assert call(models, method, ["", " "]) == [nothing, nothing]
    with pytest.raises(
        FairseqExtError, match=rf"{method}: sentences\[2\] is empty or whitespace only.*allow_empty"
    ):
        call(models, method, [good, good, " "], allow_empty=False)


def test_empty_input_counts_no_lines_and_prints_nothing(quickstart, capsys):
    """The fairseq-interactive note ("input line N is empty") is not the API's: nothing on
    stderr."""
    assert quickstart.translate(["", "A dog runs.", "A cat sleeps."]) == [
        "",
        *quickstart.translate(["A dog runs.", "A cat sleeps."]),
    ]
    assert "is empty" not in capsys.readouterr().err


def too_long(models, method: str) -> tuple[str, int, str]:
    """An input of ``method`` longer than its model takes, the model's limit and its reason."""
    good, _ = CASES[method]
    model = models(method)
    if method in ("translate", "summarize"):
        limit, why = model.input_limit()
    else:
        limit, why = model.model.max_positions(), "its positions, with <s> and </s>"
    return good + " bike" * (limit + 5), limit, why


@pytest.mark.parametrize("method", CASES)
def test_too_long_gives_none_named_in_one_warning_by_default(models, method):
    """By default every other input is answered, an over-long one gives None (no method gives
    None for an input it answered, nor ``translate`` and ``summarize`` for an empty one), and
    one warning names every such index."""
    good, nothing = CASES[method]
    long, limit, why = too_long(models, method)
    alone = call(models, method, good)
    with pytest.warns(UserWarning) as caught:
        out = call(models, method, [long, good, "", long])
    named = [str(w.message) for w in caught if "more tokens than" in str(w.message)]
    assert named == [
        f"{method}: sentences[0], sentences[3] have more tokens than the {limit} the model takes "
        f"({why}): output None; shorten, or pass too_long='truncate' to keep the first {limit} "
        "(too_long='error' refuses the call)"
    ]
    assert out == [None, alone, nothing, None] and alone is not None
    with pytest.warns(UserWarning, match=rf"^{method}: sentences\[0\] has more tokens than"):
        assert call(models, method, long) is None


@pytest.mark.parametrize("method", CASES)
def test_too_long_is_refused_or_truncated_on_request(models, method):
    good, _ = CASES[method]
    long, limit, _ = too_long(models, method)
    with pytest.raises(
        FairseqExtError,
        match=rf"{method}: sentences\[1\] has \d+ tokens, more than the {limit} "
        r".*too_long='truncate'.*too_long='skip' gives None",
    ):
        call(models, method, [good, long], too_long="error")
    with pytest.warns(
        UserWarning,
        match=rf"{method}: sentences\[1\] has \d+ tokens, more than the {limit} .*"
        rf"truncated to its first {limit}",
    ):
        out = call(models, method, [good, long], too_long="truncate")
    assert len(out) == 2 and out[0] == call(models, method, good) and out[1] is not None
    for sentences in (good, ""):  # checked before anything else, even with nothing to cut
        with pytest.raises(
            FairseqExtError, match="too_long must be one of skip, error, truncate, got 'cut'"
        ):
            call(models, method, sentences, too_long="cut")


@pytest.mark.parametrize("method", CASES)
@pytest.mark.parametrize(
    "bad,where",
    [
        (42, "sentences must be"),
        ([42], r"sentences\[0\] must be"),
        (None, "sentences must be"),
        (["ok", b"bytes"], r"sentences\[1\] must be"),
    ],
)
def test_wrong_types_are_one_type_error(models, method, bad, where):
    with pytest.raises(TypeError, match=rf"^{method}: {where} a str"):
        call(models, method, bad)


@pytest.mark.parametrize("method", CASES)
def test_unknown_keywords_are_refused_with_the_accepted_ones(models, method):
    good, _ = CASES[method]
    with pytest.raises(
        TypeError,
        match=rf"^{method}\(\) got unknown keyword\(s\) bogus_option; it accepts "
        r".*allow_empty.*too_long",
    ):
        call(models, method, good, bogus_option=3)


def test_unilm_leaves_the_target_positions_and_translate_is_summarize(
    unilm, models, tiny_data, spm_model
):
    """UniLM's source and target share one position table (--max-positions 256): an input may
    take all but two of its positions. ProphetNet and UniLM answer ``translate`` as
    ``summarize``."""
    checkpoint, _ = unilm
    model = hub.from_pretrained(
        checkpoint.parent,
        checkpoint.name,
        str(tiny_data),
        bpe="sentencepiece",
        sentencepiece_model=str(spm_model),
    )
    assert model.input_limit()[0] == model.task.model_positions - 2 == 254
    good = CASES["summarize"][0]
    assert model.summarize(["", good]) == ["", model.summarize(good)] == ["", model.translate(good)]
    with pytest.raises(
        FairseqExtError, match=r"summarize: sentences\[0\] has \d+ tokens, more than the 254 "
    ):
        model.summarize(good + " bike" * 300, too_long="error")
    with pytest.warns(
        UserWarning, match=r"summarize: sentences\[1\] has more tokens than the 254 "
    ):
        assert model.summarize([good, good + " bike" * 300]) == [model.summarize(good), None]
    assert models("summarize").translate(["", good]) == models("summarize").summarize(["", good])


def test_generation_options_by_fairseq_name_are_accepted(quickstart):
    assert quickstart.translate("A dog runs.", iter_decode_max_iter=9) == quickstart.translate(
        "A dog runs.", passes=10
    )


@pytest.mark.parametrize(
    "kw,message",
    [
        (dict(passes=0), "passes must be an integer >= 1"),
        (dict(passes=True), "passes must be an integer >= 1"),
        (dict(length_beam="3"), "length_beam must be an integer >= 1"),
        (dict(force_passes=1), "force_passes must be True or False"),
        (dict(allow_empty=None), "allow_empty must be"),
        (dict(passes=4, iter_decode_max_iter=3), "give passes or iter_decode_max_iter, not both"),
        (
            dict(length_beam=2, iter_decode_with_beam=3),
            "give length_beam or iter_decode_with_beam, not both",
        ),
    ],
)
def test_bad_translate_arguments_name_the_argument(quickstart, kw, message):
    with pytest.raises((TypeError, ValueError), match=message):
        quickstart.translate("A dog runs.", **kw)


def test_bad_encoder_arguments_name_the_argument(models):
    with pytest.raises(TypeError, match="fill_mask: topk must be an integer >= 1"):
        models("fill_mask").fill_mask(CASES["fill_mask"][0], topk=2.5)
    with pytest.raises(FairseqExtError, match="fill_mask: topk 100000 is more than"):
        models("fill_mask").fill_mask(CASES["fill_mask"][0], topk=100000)
    with pytest.raises(
        FairseqExtError, match=r"fill_mask: sentences\[1\] has 2 <mask>, it needs exactly one"
    ):
        models("fill_mask").fill_mask([CASES["fill_mask"][0], "A <mask> <mask>."])
    with pytest.raises(FairseqExtError, match="classify: return_probs must be True or False"):
        models("classify").classify("A dog.", return_probs="yes")


@pytest.mark.parametrize("method", ["translate", "fill_mask"])
def test_pieces_the_vocabulary_lacks_are_warned_about(models, method):
    good, _ = CASES[method]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call(models, method, [good])
    assert not [w for w in caught if "vocabulary lacks" in str(w.message)]
    with pytest.warns(
        UserWarning,
        match=rf"{method}: sentences\[1\] has [1-9]\d* piece\(s\) the model's "
        "vocabulary lacks",
    ):
        out = call(models, method, [good, good.replace("man", "man \U0001f600 \u4e2d\u6587")])
    assert len(out) == 2


@pytest.mark.parametrize(
    "folder,message",
    [(None, "model_dir must be a folder's path"), (42, "model_dir must be a folder's path")],
)
def test_from_pretrained_refuses_wrong_types(folder, message):
    with pytest.raises(TypeError, match=f"^from_pretrained: {message}"):
        hub.from_pretrained(folder)
    with pytest.raises(TypeError, match="^from_pretrained: checkpoint_file must be a file name"):
        hub.from_pretrained(MODEL, checkpoint_file=3)


def test_from_pretrained_refuses_unknown_options_with_the_closest_names():
    """fairseq itself ignores an override that names no option."""
    with pytest.raises(
        TypeError,
        match=r"^from_pretrained\(\) got unknown keyword\(s\) beem, bogus_option: .*"
        r"\(close: beam\)",
    ):
        hub.from_pretrained(MODEL, beem=2, bogus_option=3)


def test_from_pretrained_warms_up_what_torch_imports_on_the_first_call():
    """torch imports torch.fx.experimental.symbolic_shapes (hundreds of modules) on the first
    attention forward; loading imports it, so the first call is not the slow one (a fresh
    process, as a user's)."""
    code = (
        "import sys\nfrom fairseq_ext import hub\n"
        f"hub.from_pretrained({str(MODEL)!r})\n"
        "print('torch.fx.experimental.symbolic_shapes' in sys.modules)\n"
    )
    fresh = run([sys.executable, "-c", code], fresh=True)
    assert (
        fresh.stdout.split()[-1] == "True"
    )  # fresh, not forked: the tests' server has imported torch._dynamo

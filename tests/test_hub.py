"""The Python API (``fairseq_ext.hub``) decodes exactly as the real fairseq CLIs with the same
options: HI-CMLM on the shipped quickstart model (fairseq-generate on binarized data and
fairseq-interactive on raw text, passes, length beam and hybrid strategy), ProphetNet and
UniLM on tiny models trained here for a few updates (fairseq-generate, beam options), and
the position-masked encoder against fairseq's own one-sentence RoBERTa interface and
fairseq-validate's accuracy. The shipped folder works as it is, and bad input is one line."""

import math
import re
import subprocess
import sys

import pytest
import torch

from fairseq_ext import hub
from fairseq_ext.common.errors import FairseqExtError
from tests.conftest import ROOT, TINY_DIMS, USER_DIR, binarize, read_sample, run
from tests.test_cli_posmask import _classification_data

MODEL = ROOT / "examples" / "quickstart" / "model"
ENCODER_DIMS = [
    "--encoder-layers",
    "1",
    "--encoder-embed-dim",
    "32",
    "--encoder-ffn-embed-dim",
    "64",
    "--encoder-attention-heads",
    "2",
]
COMMON = [
    "--user-dir",
    USER_DIR,
    "--optimizer",
    "adam",
    "--lr",
    "5e-4",
    "--max-tokens",
    "2000",
    "--no-progress-bar",
    "--log-format",
    "simple",
    "--seed",
    "1",
    "--num-workers",
    "0",
    "--no-epoch-checkpoints",
    "--disable-validation",
]


def printed(stdout: str, kind: str = "D") -> list[list[str]]:
    """fairseq's ``D-`` (or ``H-``) lines as ``[score, hypothesis]``, in sentence order."""
    found = {}
    for line in stdout.splitlines():
        if line.startswith(f"{kind}-"):
            sentence_id, score, text = line[2:].split("\t")
            found[int(sentence_id)] = [score, text]
    assert sorted(found) == list(range(len(found)))
    return [found[i] for i in range(len(found))]


def detokenized(stdout: str) -> list[str]:
    """fairseq's post-processed hypotheses (``D-`` lines), in sentence order."""
    return [text for _, text in printed(stdout)]


# ------------------------------------------------------------------ HI-CMLM, the shipped model
@pytest.fixture(scope="module")
def quickstart():
    return hub.from_pretrained(MODEL)


@pytest.fixture(scope="module")
def quickstart_test_set(tmp_path_factory):
    src, ref = read_sample("test", "en", 40), read_sample("test", "de", 40)
    return src, binarize(
        MODEL / "spm.model",
        tmp_path_factory.mktemp("qs"),
        {"test": (src, ref)},
        srcdict=MODEL / "dict.txt",
    )


def test_shipped_folder_has_the_checkpoints_dictionaries(quickstart):
    """dict.en.txt and dict.de.txt (what fairseq-interactive and the API read) are dict.txt, and
    the task built from them has the checkpoint's embedding rows, symbol for symbol."""
    words = (MODEL / "dict.txt").read_bytes()
    assert (MODEL / "dict.en.txt").read_bytes() == words == (MODEL / "dict.de.txt").read_bytes()
    rows = torch.load(MODEL / "checkpoint.pt", map_location="cpu", weights_only=True)["model"][
        "encoder.embed_tokens.weight"
    ].shape[0]
    for dictionary in (quickstart.src_dict, quickstart.tgt_dict):
        assert len(dictionary) == rows == 4 + len(words.decode("utf-8").splitlines())
        assert dictionary.symbols[4:] == [
            line.split(" ")[0] for line in words.decode("utf-8").splitlines()
        ]


@pytest.mark.parametrize("passes,length_beam,strategy", [(10, 3, None), (3, 1, "all_mask")])
def test_hicmlm_translate_equals_fairseq_generate(
    quickstart, quickstart_test_set, passes, length_beam, strategy
):
    src, data = quickstart_test_set
    overrides = ["--model-overrides", f"{{'hybrid_strategy': '{strategy}'}}"] if strategy else []
    out = run(
        [
            "fairseq-generate",
            data,
            "--user-dir",
            USER_DIR,
            "--task",
            "cmlm_hybrid",
            "-s",
            "en",
            "-t",
            "de",
            "--path",
            MODEL / "checkpoint.pt",
            "--gen-subset",
            "test",
            "--batch-size",
            "16",
            "--iter-decode-max-iter",
            str(passes - 1),
            "--iter-decode-with-beam",
            str(length_beam),
            "--post-process",
            "sentencepiece",
            *overrides,
        ]
    )
    ours = quickstart.translate(
        src,
        passes=passes,
        length_beam=length_beam,
        strategy=strategy,
        length_offset=0,
        remove_repeats=0,
    )  # fairseq-generate's own decoding: no offset, repeats kept
    assert ours == detokenized(out.stdout)
    assert (
        quickstart.models[0].decoder.hybrid_strategy == "fence_replace"
    )  # the strategy was for that call only


def test_quickstart_translates_through_fairseq_interactive_as_shipped(quickstart):
    """fairseq-interactive reads the shipped folder as it is (raw text in, sentencepiece from the
    folder) and prints what the API returns for a single string and for the batch."""
    src = read_sample("test", "en", 12)
    out = run(
        [
            "fairseq-interactive",
            MODEL,
            "--user-dir",
            USER_DIR,
            "--task",
            "cmlm_hybrid",
            "-s",
            "en",
            "-t",
            "de",
            "--path",
            MODEL / "checkpoint.pt",
            "--bpe",
            "sentencepiece",
            "--sentencepiece-model",
            MODEL / "spm.model",
            "--iter-decode-max-iter",
            "9",
            "--iter-decode-with-beam",
            "3",
            "--buffer-size",
            "12",
            "--batch-size",
            "12",
        ],
        input="\n".join(src) + "\n",
    )
    expected = detokenized(out.stdout)
    plain = {"passes": 10, "length_beam": 3, "length_offset": 0, "remove_repeats": 0}
    assert quickstart.translate(src, **plain) == expected
    assert quickstart.translate(src[0], **plain) == expected[0]


READABLE = [
    "A woman sings.",
    "A man is riding a bike.",
    "Two dogs play in the snow.",
    "A child eats an apple.",
]


def test_default_translate_is_the_recommended_setting_and_repeats_no_word(quickstart):
    """Without arguments, translate decodes as the results pages do (10 passes, length beam 3),
    and none of a few plain sentences comes back with a word twice in a row (fairseq's own
    11 passes and length beam 1 give "Eine Frau singt singt."); what from_pretrained is given
    wins."""
    default = quickstart.translate(READABLE)
    assert default == quickstart.translate(READABLE, passes=10, length_beam=3)
    for text in default:
        words = re.findall(r"\w+", text.lower())
        assert words and not any(a == b for a, b in zip(words, words[1:])), text
    plain = hub.from_pretrained(MODEL, iter_decode_max_iter=10, iter_decode_with_beam=1)
    assert plain.translate(READABLE) == quickstart.translate(READABLE, passes=11, length_beam=1)


def test_the_packaged_student_by_name_translates_as_the_shipped_folder(
    quickstart, tmp_path, monkeypatch
):
    """The name a pip install resolves (``hi-cmlm-multi30k-en-de``, package data) gives what
    examples/quickstart/model gives; a folder of that name in the working directory wins over it,
    and an unknown name is one error that lists the shipped names."""
    monkeypatch.chdir(tmp_path)
    assert hub.from_pretrained("hi-cmlm-multi30k-en-de").translate(
        READABLE
    ) == quickstart.translate(READABLE)
    with pytest.raises(
        FairseqExtError,
        match=r"^model folder \S+/hi-cmlm-multi30k-en-d does not exist; give the "
        r"folder that holds the checkpoint, or the name of a model the package "
        r"ships \(hi-cmlm-multi30k-en-de\)$",
    ):
        hub.from_pretrained("hi-cmlm-multi30k-en-d")
    (tmp_path / "hi-cmlm-multi30k-en-de").mkdir()
    with pytest.raises(FairseqExtError, match="holds none of checkpoint.pt"):
        hub.from_pretrained("hi-cmlm-multi30k-en-de")


def test_fairseqs_own_from_pretrained_with_user_dir(tmp_path):
    """Without this API, fairseq's own hub loader works once the plugin is loaded through its
    user_dir argument (a process of its own that has imported nothing of the plugin)."""
    code = (
        "from fairseq.models.nat import CMLMNATransformerModel\nm = "
        f"CMLMNATransformerModel.from_pretrained({str(MODEL)!r}, checkpoint_file='checkpoint.pt', "
        f"user_dir={USER_DIR!r}, bpe='sentencepiece', "
        f"sentencepiece_model={str(MODEL / 'spm.model')!r})\nprint(m.translate('A man is riding a "
        "bike.', iter_decode_max_iter=9, iter_decode_with_beam=3))\n"
    )
    proc = run([sys.executable, "-c", code], cwd=tmp_path)
    from_api = hub.from_pretrained(MODEL, length_offset=0, remove_repeats=0).translate(
        "A man is riding a bike.", passes=10, length_beam=3
    )  # fairseq's loader decodes with fairseq-generate's own defaults: no offset, repeats kept
    assert proc.stdout.strip().splitlines()[-1] == from_api


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (make gpu-check)")
def test_translate_on_cuda_equals_cpu(quickstart):
    src = read_sample("test", "en", 16)
    on_cpu = quickstart.translate(src, passes=10, length_beam=3)
    on_gpu = hub.from_pretrained(MODEL, device="cuda")
    assert on_gpu.device.type == "cuda"
    assert on_gpu.translate(src, passes=10, length_beam=3) == on_cpu


# ------------------------------------------------------------------ ProphetNet and UniLM
@pytest.fixture(scope="module")
def prophetnet(tiny_data, tmp_path_factory):
    save = tmp_path_factory.mktemp("hub_prophetnet")
    run(
        [
            "fairseq-train",
            tiny_data,
            "--task",
            "translation_prophetnet",
            "-s",
            "en",
            "-t",
            "de",
            "--arch",
            "prophetnet_tiny",
            *TINY_DIMS,
            "--criterion",
            "ngram_language_loss",
            "--max-update",
            "6",
            "--save-dir",
            save,
            *COMMON,
        ]
    )
    return save / "checkpoint_last.pt", "translation_prophetnet"


@pytest.fixture(scope="module")
def unilm(tiny_data, tmp_path_factory):
    save = tmp_path_factory.mktemp("hub_unilm")
    run(
        [
            "fairseq-train",
            tiny_data,
            "--task",
            "unilm_seq2seq",
            "-s",
            "en",
            "-t",
            "de",
            "--arch",
            "unilm_transformer_tiny",
            *ENCODER_DIMS,
            "--max-positions",
            "256",
            "--criterion",
            "label_smoothed_cross_entropy",
            "--max-update",
            "6",
            "--save-dir",
            save,
            *COMMON,
        ]
    )
    return save / "checkpoint_last.pt", "unilm_seq2seq"


@pytest.mark.parametrize(
    "family,options",
    [
        (
            "prophetnet",
            (
                "--beam",
                "4",
                "--lenpen",
                "0.6",
                "--min-len",
                "3",
                "--max-len-b",
                "10",
                "--no-repeat-ngram-size",
                "2",
            ),
        ),
        ("unilm", ("--beam", "3", "--max-len-b", "12", "--lenpen", "1.5")),
    ],
)
def test_seq2seq_summarize_equals_fairseq_generate(request, family, options, tiny_data, spm_model):
    checkpoint, task = request.getfixturevalue(family)
    out = run(
        [
            "fairseq-generate",
            tiny_data,
            "--user-dir",
            USER_DIR,
            "--task",
            task,
            "-s",
            "en",
            "-t",
            "de",
            "--path",
            checkpoint,
            "--gen-subset",
            "test",
            "--batch-size",
            "16",
            "--post-process",
            "sentencepiece",
            *options,
        ]
    )
    model = hub.from_pretrained(
        checkpoint.parent,
        checkpoint.name,
        data_name_or_path=str(tiny_data),
        bpe="sentencepiece",
        sentencepiece_model=str(spm_model),
    )
    names = [o[2:].replace("-", "_") for o in options[::2]]
    values = [float(v) if "." in v else int(v) for v in options[1::2]]
    options = dict(zip(names, values))
    src = read_sample("test", "en", 21)
    assert model.summarize(src, **options) == detokenized(out.stdout)
    # A model of 6 updates writes much the same words for every input; its scores show that
    # every sentence went through the same computation as in fairseq-generate.
    scores = [
        float(hypos[0]["score"]) / math.log(2)  # fairseq-generate prints base-2 scores
        for hypos in model.generate([model.encode(s) for s in src], **options)
    ]
    theirs = [float(score) for score, _ in printed(out.stdout, "H")]
    assert max(abs(a - b) for a, b in zip(scores, theirs)) < 1e-4 and len(set(theirs)) > 10


# ------------------------------------------------------------------ the position-masked encoder
@pytest.fixture(scope="module")
def classifier(spm_model, mono_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("hub_classifier")
    data = _classification_data(spm_model, mono_data, out)
    run(
        [
            "fairseq-train",
            data,
            "--task",
            "sentence_prediction",
            "--num-classes",
            "2",
            "--max-positions",
            "128",
            "--init-token",
            "0",
            "--separator-token",
            "2",
            "--arch",
            "position_masked_roberta_tiny",
            *ENCODER_DIMS,
            "--criterion",
            "sentence_prediction",
            "--batch-size",
            "16",
            "--max-update",
            "10",
            "--save-dir",
            out / "ft",
            *COMMON,
        ]
    )
    return out


def test_classify_equals_fairseqs_predict_and_criterion(classifier, spm_model):
    """Batched labels equal fairseq's one-sentence ``predict``; from raw text they are right as
    often as fairseq's criterion counts on the binarized validation split."""
    model = hub.from_pretrained(
        classifier / "ft",
        "checkpoint_last.pt",
        data_name_or_path=str(classifier / "bin"),
        bpe="sentencepiece",
        sentencepiece_model=str(spm_model),
    )
    sentences = (classifier / "valid.raw").read_text().splitlines()
    gold = (classifier / "valid.label").read_text().split()
    labels = model.classify(sentences, batch_size=7)
    one_by_one = [
        model.predict("sentence_classification_head", model.encode(s))[0].exp() for s in sentences
    ]
    reference = [
        model.task.label_dictionary[int(p.argmax()) + model.task.label_dictionary.nspecial]
        for p in one_by_one
    ]
    assert labels == reference and set(labels) <= {"man", "other"}
    with_probs = model.classify(sentences, return_probs=True, batch_size=7)
    assert [label for label, _ in with_probs] == labels
    assert max(float((p - q).abs().max()) for (_, p), q in zip(with_probs, one_by_one)) < 1e-5
    assert model.classify(sentences[0]) == labels[0]
    # fairseq-validate's computation (its CLI stops in omegaconf on this task's saved config):
    # the binarized split, the task's batches, the criterion's count of correct labels
    task = model.task
    task.load_dataset("valid")
    criterion = task.build_criterion(model.cfg.criterion)
    batches = task.get_batch_iterator(task.dataset("valid"), max_sentences=8).next_epoch_itr(
        shuffle=False
    )
    with torch.no_grad():
        correct = sum(criterion(model.model.eval(), sample)[2]["ncorrect"] for sample in batches)
    assert int(correct) == sum(a == b for a, b in zip(labels, gold))


@pytest.fixture(scope="module")
def masked_lm(mono_data, tmp_path_factory):
    save = tmp_path_factory.mktemp("hub_posmask")
    run(
        [
            "fairseq-train",
            mono_data,
            "--task",
            "position_masked_lm",
            "--arch",
            "position_masked_roberta_tiny",
            *ENCODER_DIMS,
            "--criterion",
            "position_masked_lm",
            "--tokens-per-sample",
            "128",
            "--sample-break-mode",
            "eos",
            "--batch-size",
            "8",
            "--position-mask-prob",
            "0.2",
            "--max-update",
            "6",
            "--save-dir",
            save,
            *COMMON,
        ]
    )
    return save


def test_fill_mask_equals_fairseqs_one_sentence_fill_mask(masked_lm, mono_data, spm_model):
    model = hub.from_pretrained(
        masked_lm,
        "checkpoint_last.pt",
        data_name_or_path=str(mono_data),
        bpe="sentencepiece",
        sentencepiece_model=str(spm_model),
    )
    sentences = [
        "A man in a <mask> shirt is riding a bike.",
        "Two <mask> play in the snow.",
        "<mask> woman sings.",
    ]
    batched = model.fill_mask(sentences, topk=4)
    for sentence, ours in zip(sentences, batched):
        theirs = super(type(model), model).fill_mask(
            sentence, topk=4
        )  # fairseq's RobertaHubInterface
        assert [o[0] for o in ours] == [t[0] for t in theirs]
        assert [o[2] for o in ours] == [t[2] for t in theirs]
        assert torch.allclose(
            torch.tensor([o[1] for o in ours]), torch.tensor([t[1] for t in theirs]), atol=1e-5
        )
    assert model.fill_mask(sentences[0], topk=4) == batched[0]


# ------------------------------------------------------------------ bad input
def test_bad_input_is_one_clear_error(tmp_path, quickstart):
    with pytest.raises(FairseqExtError, match="none of checkpoint.pt"):
        hub.from_pretrained(tmp_path)
    (tmp_path / "checkpoint.pt").write_bytes((MODEL / "checkpoint.pt").read_bytes())
    with pytest.raises(
        FairseqExtError, match="dict.en.txt does not exist: give the data directory"
    ):
        hub.from_pretrained(tmp_path)
    with pytest.raises(FairseqExtError, match="passes must be an integer >= 1"):
        quickstart.translate("A man.", passes=0)
    with pytest.raises(FairseqExtError, match="strategy 'fence' is unknown"):
        quickstart.translate("A man.", strategy="fence")


def test_folder_that_is_missing_a_file_or_holds_a_cut_dictionary_is_one_error(tmp_path):
    """The folder and its dictionaries are checked before fairseq reads them
    (``fairseq_ext.fairseq_changes.preflight``)."""
    (tmp_path / "afile").write_text("not a folder\n")
    for given, wrong in (
        (tmp_path / "missing", "does not exist"),
        (tmp_path / "afile", "is a file, not a folder"),
    ):
        with pytest.raises(
            FairseqExtError,
            match=f"^model folder {re.escape(str(given))} {wrong}; give the folder "
            "that holds the checkpoint, or the name of a model the package "
            r"ships \(hi-cmlm-multi30k-en-de\)$",
        ):
            hub.from_pretrained(given)
    folder = tmp_path / "model"
    folder.mkdir()
    for name in ("checkpoint.pt", "spm.model", "dict.de.txt"):
        (folder / name).symlink_to(MODEL / name)
    (folder / "dict.en.txt").write_bytes((MODEL / "dict.en.txt").read_bytes()[:1000])
    with pytest.raises(
        FairseqExtError,
        match=f"^dictionary {re.escape(str(folder / 'dict.en.txt'))} is cut short: "
        "its last line, line ",
    ):
        hub.from_pretrained(folder)


def test_plain_fairseq_without_the_plugin_fails_as_documented(tmp_path):
    """What docs/python-api.md says happens without the plugin: torch refuses the checkpoint's
    argparse.Namespace (nothing of the plugin runs, so the message is torch's)."""
    code = (
        "from fairseq.models.nat import CMLMNATransformerModel\n"
        f"CMLMNATransformerModel.from_pretrained({str(MODEL)!r}, checkpoint_file='checkpoint.pt')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path
    )
    assert (
        proc.returncode != 0
        and "Weights only load failed" in proc.stderr
        and "argparse.Namespace" in proc.stderr
    )

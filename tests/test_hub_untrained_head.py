"""A BERT checkpoint converted without its MLM head (a ``BertModel``, as all-MiniLM-L6-v2 is)
has an untrained ``lm_head``: the converted folder records it and the Python API warns once,
at load, that ``fill_mask`` is meaningless; with the head converted there is no warning."""

import json
import warnings

import pytest

pytest.importorskip("transformers")

from fairseq_ext import hub  # noqa: E402
from fairseq_ext.convert import bert  # noqa: E402
from fairseq_ext.convert.transformers_folder import read_folder  # noqa: E402
from tests.test_convert import tiny_bert  # noqa: E402


def converted(tmp_path, head: bool):
    tiny_bert(tmp_path / "hf", head=head)
    bert.convert(read_folder(tmp_path / "hf"), tmp_path / "out")
    return tmp_path / "out"


def test_untrained_head_warns_once_at_load(tmp_path):
    out = converted(tmp_path, head=False)
    assert json.loads((out / "conversion.json").read_text()) == {
        "model_type": "bert",
        "mlm_head": "new",
    }
    with pytest.warns(
        UserWarning, match="without an MLM head .* fill_mask's fillings are meaningless"
    ):
        model = hub.from_pretrained(out)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert len(model.fill_mask("w3 <mask> w12", topk=3)) == 3
    assert not [w for w in caught if "MLM head" in str(w.message)]


def test_converted_head_loads_without_a_warning(tmp_path):
    out = converted(tmp_path, head=True)
    assert json.loads((out / "conversion.json").read_text())["mlm_head"] == "converted"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hub.from_pretrained(out)
    assert not [w for w in caught if "MLM head" in str(w.message)]

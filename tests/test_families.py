"""The family registry (``fairseq_ext.common.families``) names what fairseq registers, the hub reads
it to pick an interface, and the mask layer knows no task of it."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from fairseq.models import MODEL_REGISTRY
from fairseq.tasks import TASK_REGISTRY

from fairseq_ext import plugin
from fairseq_ext.analysis.draw_mask import SCRIPTS
from fairseq_ext.common.errors import FairseqExtError
from fairseq_ext.common.families import FAMILIES, hub_family, masks_of_task, tasks_of_mask
from fairseq_ext.hub import encoder, generation, loading
from fairseq_ext.masking import ATTENTION_VARIANTS
from tests.conftest import ROOT

plugin.load()


def test_every_family_names_what_fairseq_registers():
    for family in FAMILIES:
        assert all(
            TASK_REGISTRY[t].__module__.startswith("fairseq_ext.tasks.") for t in family.tasks
        ), family.name
        assert all(
            MODEL_REGISTRY[m].__module__.startswith("fairseq_ext.models.") for m in family.models
        ), family.name
        assert hasattr(generation, family.hub_interface) or hasattr(
            encoder, family.hub_interface
        ), family.name
        assert set(family.attention_masks) <= set(family.tasks)
        assert all(
            m in ATTENTION_VARIANTS for masks in family.attention_masks.values() for m in masks
        )
        assert all(
            TASK_REGISTRY[t].__module__.startswith("fairseq.tasks.") for t in family.fairseq_tasks
        ), family.name


def test_checkpoint_families_are_the_registrys():
    """Which tasks share checkpoints comes from the registry alone: each family's tasks and
    fairseq's own that share them, every task in one family, only HI-CMLM's beyond
    ``translation``."""
    from fairseq_ext.checkpoints.checks import NON_AUTOREGRESSIVE, TASK_FAMILIES, family_of

    assert TASK_FAMILIES == (
        frozenset({"cmlm_hybrid", "translation_lev"}),
        frozenset({"translation_prophetnet", "prophetnet_denoising"}),
        frozenset({"unilm_seq2seq", "permutation_lm"}),
        frozenset({"position_masked_lm", "masked_lm"}),
    )
    assert NON_AUTOREGRESSIVE == family_of("cmlm_hybrid") and family_of("translation") is None
    names = [t for family in TASK_FAMILIES for t in family]
    assert len(names) == len(set(names))


def test_every_mask_picture_belongs_to_one_family():
    pictures = [p for family in FAMILIES for p in family.mask_pictures]
    assert sorted(pictures) == sorted(SCRIPTS)


def test_every_attention_mask_is_trained_by_a_task():
    assert {m for m in ATTENTION_VARIANTS if tasks_of_mask(m)} == set(ATTENTION_VARIANTS)
    assert tasks_of_mask("prefix") == ("unilm_seq2seq",) and masks_of_task("cmlm_hybrid") == ()


def test_the_mask_layer_names_no_task_of_the_plugin():
    tasks = [t for family in FAMILIES for t in family.tasks]
    for path in sorted((ROOT / "fairseq_ext" / "masking").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert not [t for t in tasks if t in text], path.name


@pytest.mark.parametrize(
    "task, arch, interface",
    [
        ("cmlm_hybrid", "hi_cmlm_transformer_tiny", "HICMLMHubInterface"),
        ("translation_prophetnet", "prophetnet_tiny", "Seq2SeqHubInterface"),
        ("unilm_seq2seq", "unilm_transformer_tiny", "Seq2SeqHubInterface"),
        ("position_masked_lm", "position_masked_roberta_tiny", "PositionMaskedHubInterface"),
        ("sentence_prediction", "position_masked_roberta_base", "PositionMaskedHubInterface"),
    ],
)
def test_the_hub_serves_the_family_of_a_checkpoint(task, arch, interface):
    assert hub_family(task, arch).hub_interface == interface


def test_the_hub_refuses_a_checkpoint_no_family_serves():
    assert (
        hub_family("sentence_prediction", "roberta_base") is None
        and hub_family("translation", "transformer") is None
    )
    cfg = argparse.Namespace(
        task=argparse.Namespace(_name="sentence_prediction"),
        model=argparse.Namespace(arch="roberta_base"),
    )
    with pytest.raises(
        FairseqExtError,
        match=r"--task sentence_prediction \(--arch roberta_base\), which has no "
        r"Python API here; the API serves cmlm_hybrid, translation_prophetnet, "
        r"unilm_seq2seq, position_masked_lm or sentence_prediction "
        r"\(position_masked_roberta only\)",
    ):
        loading._interface(cfg, None, [], {})


def test_no_table_of_task_names_in_the_hub():
    text = Path(loading.__file__).read_text(encoding="utf-8")
    assert not [t for family in FAMILIES for t in family.tasks if f'"{t}"' in text]

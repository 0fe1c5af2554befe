"""The plugin's four families, one entry each (HI-CMLM: Wang et al. 2021; ProphetNet: Qi et al.
2020; UniLM: Dong et al. 2019, on one stack as Su 2019 builds it; position masking: Wagner et al.
2020). Names only: no fairseq, no torch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass(frozen=True)
class Family:
    """One masking technique: its ``register_task`` and ``register_model`` names; the class of
    ``fairseq_ext.hub`` that serves checkpoints of ``hub_tasks`` (only of ``hub_model``'s
    architectures where given); for a one-stack family, the ``--attention-mask`` names each task
    trains; the ``analysis.draw_mask`` scripts of its masks; fairseq's own tasks whose checkpoints
    may start one of its tasks (never another family's); whether fairseq's ``translation`` decodes
    its models (``autoregressive``)."""

    name: str
    tasks: tuple[str, ...]
    models: tuple[str, ...]
    hub_interface: str
    hub_tasks: tuple[str, ...]
    mask_pictures: tuple[str, ...]
    hub_model: Optional[str] = None
    attention_masks: dict[str, tuple[str, ...]] = field(default_factory=dict)
    fairseq_tasks: tuple[str, ...] = ()
    autoregressive: bool = True


FAMILIES: tuple[Family, ...] = (
    Family(
        "HI-CMLM",
        tasks=("cmlm_hybrid",),
        models=("hi_cmlm_transformer",),
        hub_interface="HICMLMHubInterface",
        hub_tasks=("cmlm_hybrid",),
        mask_pictures=("hicmlm",),
        fairseq_tasks=("translation_lev",),
        autoregressive=False,
    ),
    Family(
        "ProphetNet",
        tasks=("prophetnet_denoising", "translation_prophetnet"),
        models=("prophetnet",),
        hub_interface="Seq2SeqHubInterface",
        hub_tasks=("translation_prophetnet",),
        mask_pictures=("ngram",),
    ),
    Family(
        "UniLM",
        tasks=("unilm_seq2seq", "permutation_lm"),
        models=("unilm_transformer",),
        hub_interface="Seq2SeqHubInterface",
        hub_tasks=("unilm_seq2seq",),
        mask_pictures=("prefix", "causal", "permutation"),
        attention_masks={
            "unilm_seq2seq": ("prefix", "causal"),
            "permutation_lm": ("causal", "permutation"),
        },
    ),
    Family(
        "position masking",
        tasks=("position_masked_lm",),
        models=("position_masked_roberta",),
        hub_interface="PositionMaskedHubInterface",
        hub_tasks=("position_masked_lm", "sentence_prediction"),
        hub_model="position_masked_roberta",
        mask_pictures=("bidirectional",),
        fairseq_tasks=("masked_lm",),
    ),
)


def masks_of_task(task: str) -> tuple[str, ...]:
    """The ``--attention-mask`` names that ``task`` trains (none outside one-stack families)."""
    return next((f.attention_masks[task] for f in FAMILIES if task in f.attention_masks), ())


def tasks_of_mask(mask: str) -> tuple[str, ...]:
    """The tasks that train the ``--attention-mask`` ``mask``."""
    return tuple(
        task for f in FAMILIES for task, masks in f.attention_masks.items() if mask in masks
    )


def hub_family(task: str, arch: str) -> Optional[Family]:
    """The family whose Python API serves a checkpoint of ``task`` and ``arch``, if any."""
    return next(
        (
            f
            for f in FAMILIES
            if task in f.hub_tasks and (f.hub_model is None or arch.startswith(f.hub_model))
        ),
        None,
    )


def hub_offer() -> str:
    """What the Python API serves, in words."""
    return ", ".join(
        f"{' or '.join(f.hub_tasks)}" + (f" ({f.hub_model} only)" if f.hub_model else "")
        for f in FAMILIES
    )

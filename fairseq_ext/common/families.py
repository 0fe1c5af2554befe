"""The plugin's four families, one entry each: the tasks that train and decode it, its models, the
hub interface that serves it and the pictures of its masks (HI-CMLM: Wang et al. 2021;
ProphetNet: Qi et al. 2020; UniLM on one stack: Su 2019; position masking: Wagner et al. 2020).
Names only: no fairseq, no torch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass(frozen=True)
class Family:
    """One masking technique of the plugin.

    Attributes:
        name: the technique, as the docs name it.
        tasks: its ``register_task`` names.
        models: its ``register_model`` names (each with its architectures).
        hub_interface: the class of ``fairseq_ext.hub`` that serves its checkpoints.
        hub_tasks: the tasks whose checkpoints the Python API loads (fairseq's own among them
            where such a task fine-tunes the family's model).
        hub_model: where given, the API serves ``hub_tasks`` only for architectures of this model.
        attention_masks: for a one-stack family, the ``--attention-mask`` names (keys of
            ``masking.ATTENTION_VARIANTS``) that each task trains.
        mask_pictures: the scripts of ``analysis.draw_mask`` that draw its masks.
        fairseq_tasks: fairseq's own tasks that share its checkpoints (a checkpoint of one task of
            ``tasks + fairseq_tasks`` may start another, never a task of another family).
        autoregressive: whether fairseq's ``translation`` can decode its models.
    """

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
    """The ``--attention-mask`` names that ``task`` trains (none for a task of no one-stack
    family)."""
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

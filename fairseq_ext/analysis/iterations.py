"""The HI-CMLM paper's three views of mask-predict, from ``fairseq-generate`` output:
BLEU after each iteration (Figure 2), BLEU by target-length bin (Table 2) and the share of
copied embeddings among the masked slots per iteration (Figure 3)."""

from __future__ import annotations

from collections.abc import Sequence

import sacrebleu
import torch

from fairseq_ext.analysis.generate_output import MASK_TOKEN, Decoded, detokenize
from fairseq_ext.masking.hybrid import FENCE_FIRST, PAPER_MASK_WEIGHT, source_copy_weight

LENGTH_BINS: tuple[tuple[int, float], ...] = ((0, 10), (10, 23), (23, float("inf")))


def bin_label(lo: int, hi: float) -> str:
    return f"[{lo},{'inf' if hi == float('inf') else int(hi)})"


def length_bin(reference: str, bins: Sequence[tuple[int, float]] = LENGTH_BINS) -> int:
    """Index of the bin of a reference's length in whitespace words."""
    n = len(reference.split())
    for k, (lo, hi) in enumerate(bins):
        if lo <= n < hi:
            return k
    raise ValueError(f"length {n} is in no bin of {bins}")


def corpus_bleu(hypotheses: list[str], references: list[str]) -> float:
    """sacrebleu's default corpus BLEU (13a tokenisation), 0 for an empty set."""
    if not hypotheses:
        return float("nan")
    return sacrebleu.corpus_bleu(hypotheses, [references]).score


def hypothesis_after(d: Decoded, iteration: int, post_process: str | None) -> str:
    """Output after ``iteration`` passes (a sentence that stopped early keeps its last)."""
    preds = d.predictions
    if not preds:
        raise ValueError(
            "the output has no iteration history: run fairseq-generate with --retain-iter-history"
        )
    return detokenize(preds[min(iteration, len(preds)) - 1], post_process)


def bleu_per_iteration(
    sentences: list[Decoded], max_iter: int, post_process: str | None
) -> list[float]:
    refs = [d.reference for d in sentences]
    return [
        corpus_bleu([hypothesis_after(d, t, post_process) for d in sentences], refs)
        for t in range(1, max_iter + 1)
    ]


def bleu_by_length(
    sentences: list[Decoded], bins: Sequence[tuple[int, float]] = LENGTH_BINS
) -> list[float]:
    """Final-output BLEU of each reference-length bin (the paper's Table 2)."""
    groups: list[list[Decoded]] = [[] for _ in bins]
    for d in sentences:
        groups[length_bin(d.reference, bins)].append(d)
    return [corpus_bleu([d.hypothesis for d in g], [d.reference for d in g]) for g in groups]


def copy_counts(
    pass_input: list[str],
    strategy: str,
    mask_weight: float = PAPER_MASK_WEIGHT,
    fence_first: str = FENCE_FIRST[0],
) -> tuple[float, int, int]:
    """Z mass, masked slots and all slots of one printed decoder input, weighed by
    ``masking.source_copy_weight`` of the strategy the model ran."""
    masked = torch.tensor([[False, *(tok == MASK_TOKEN for tok in pass_input), False]])
    z = source_copy_weight(masked, strategy, mask_weight, fence_first)
    return float(z.sum()), int(masked.sum()), len(pass_input)


def copy_share_per_iteration(
    sentences: list[Decoded],
    max_iter: int,
    strategy: str,
    mask_weight: float = PAPER_MASK_WEIGHT,
    fence_first: str = FENCE_FIRST[0],
    of: str = "masked",
    bins: Sequence[tuple[int, float]] = LENGTH_BINS,
) -> list[list[float]]:
    """``[bin][iteration]``: Z among the masked (``of="masked"``, Figure 3) or all slots of each
    pass, over the sentences still decoding (NaN when none was)."""
    if of not in ("masked", "all"):
        raise ValueError("of must be 'masked' or 'all'")
    z = [[0.0] * max_iter for _ in bins]
    n = [[0] * max_iter for _ in bins]
    for d in sentences:
        b = length_bin(d.reference, bins)
        for t, inp in enumerate(d.pass_inputs[:max_iter]):
            zt, masked, total = copy_counts(inp, strategy, mask_weight, fence_first)
            z[b][t] += zt
            n[b][t] += masked if of == "masked" else total
    return [
        [z[b][t] / n[b][t] if n[b][t] else float("nan") for t in range(max_iter)]
        for b in range(len(bins))
    ]

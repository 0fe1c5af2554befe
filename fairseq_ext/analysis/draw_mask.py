"""Draw the masks of the plugin the way Su 2019's figures do: rows = outputs (queries),
columns = inputs (keys); a filled cell means "may attend" (Su 2019, "Analysis").

    python -m fairseq_ext.analysis.draw_mask causal                 # text in the terminal
    python -m fairseq_ext.analysis.draw_mask permutation --order 4,2,5,3,1 --png perm.png
    python -m fairseq_ext.analysis.draw_mask prefix --source "what do you want to eat" \\
        --target "white cut chicken"
    python -m fairseq_ext.analysis.draw_mask hicmlm --length 10 --iterations 10 --iteration 3
    python -m fairseq_ext.analysis.draw_mask ngram --length 5 --ngram 2
    python -m fairseq_ext.analysis.draw_mask --all docs/masks       # every script as PNG

Every attention picture is the rule that runs, drawn: ``masking.mask_picture`` of a rule of
``masking.predicates``, the causal, prefix and permutation rules taken from
``masking.ATTENTION_VARIANTS`` (the ``--attention-mask`` choices of ``unilm_transformer``). A
script is one entry of ``SCRIPTS``: a function of its options that returns a ``MaskPicture``.
"""

from __future__ import annotations

import inspect
import os
import sys
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import Tensor

from fairseq_ext.common.cli import command_parser
from fairseq_ext.fairseq_changes import quiet

if __name__ == "__main__":  # before the imports below import fairseq
    quiet.hush_command(sys.argv[1:])

from fairseq_ext.masking import (  # noqa: E402
    ATTENTION_VARIANTS,
    HYBRID_STRATEGIES,
    mask_picture,
    order_ranks,
    predicates,
    source_copy_weight,
)
from fairseq_ext.models.hi_cmlm_transformer import HiCMLMConfig
from fairseq_ext.models.prophetnet import ProphetNetConfig

# (label, text character, colour) per value of a picture's matrix
ATTENTION_LEGEND = (("does not attend", ".", "#f2f2f2"), ("attends", "#", "#2f6db5"))
DECODER_INPUT_LEGEND = (
    ("observed token", "w", "#d9d9d9"),
    ("[MASK] embedding (M)", "M", "#ffffff"),
    ("copied source embedding (Z)", "Z", "#e07b39"),
    ("mix of M and Z", "m", "#f3c197"),
)


@dataclass
class MaskPicture:
    """A matrix of legend indices (a bool attention mask is 0/1) with axis labels."""

    matrix: Tensor
    rows: list[str]
    cols: list[str]
    title: str
    legend: tuple = ATTENTION_LEGEND
    xlabel: str = "inputs (keys)"
    ylabel: str = "outputs (queries)"
    note: str = ""

    def __post_init__(self):
        self.matrix = self.matrix.long()
        if tuple(self.matrix.shape) != (len(self.rows), len(self.cols)):
            raise ValueError(
                f"matrix {tuple(self.matrix.shape)} for {len(self.rows)} rows and "
                f"{len(self.cols)} columns"
            )


@dataclass(frozen=True)
class Script:
    """One drawable mask: ``draw(**options)`` and the help of each option (its type and default
    are those of ``draw``'s keyword)."""

    draw: Callable[..., MaskPicture]
    help: str
    options: dict[str, str] = field(default_factory=dict)


DEFAULT_WORDS = "bei jing huan ying ni"  # 北京欢迎你, "Beijing welcomes you", Su 2019's example


def _variant_rule(name: str, segment_ids: list[int], order: list[int]) -> predicates.MaskMod:
    ranks = order_ranks(torch.tensor([order]))
    return ATTENTION_VARIANTS[name].rule(torch.tensor([segment_ids]), ranks)


def _language_model_picture(name: str, words: list[str], order: list[int]) -> Tensor:
    """Su 2019's LM pictures: the row of word x_i is the input row that predicts it."""
    rule = _variant_rule(name, [0] * (len(words) + 1), order)
    predictor = {p: order[k - 1] for k, p in enumerate(order) if k}
    return mask_picture(rule, [predictor[p] for p in range(1, len(words) + 1)], len(words) + 1)


def draw_bidirectional(words: str = DEFAULT_WORDS) -> MaskPicture:
    tokens = ["[CLS]", *words.split(), "[SEP]"]
    m = mask_picture(predicates.bidirectional, len(tokens), len(tokens))
    return MaskPicture(m, tokens, tokens, "bidirectional (BERT): every token sees every token")


def draw_causal(words: str = DEFAULT_WORDS) -> MaskPicture:
    """Su 2019's unidirectional LM picture: x_i is predicted from <s> x_1 .. x_{i-1}."""
    words_ = words.split()
    m = _language_model_picture("causal", words_, list(range(len(words_) + 1)))
    return MaskPicture(
        m, words_, ["<s>", *words_], "causal LM: x_i is predicted from <s>, x_1 .. x_{i-1}"
    )


def _parse_order(order: str, n: int) -> list[int]:
    try:
        positions = [int(p) for p in order.replace(" ", "").split(",") if p]
    except ValueError:
        raise ValueError(
            f"--order {order!r}: give comma-separated word positions, e.g. 4,2,5,3,1"
        ) from None
    if sorted(positions) != list(range(1, n + 1)):
        raise ValueError(
            f"--order {order!r} is not a permutation of the word positions 1..{n}: "
            "each position must appear exactly once"
        )
    return positions


def draw_permutation(
    words: str = DEFAULT_WORDS, order: str = "4,2,5,3,1", seed: int = -1
) -> MaskPicture:
    """Su 2019's permutation LM picture: x_i sees <s> and the words before it in the order."""
    words_ = words.split()
    n = len(words_)
    if seed >= 0:
        g = torch.Generator().manual_seed(seed)
        positions = (torch.randperm(n, generator=g) + 1).tolist()
    else:
        positions = _parse_order(order, n)
    m = _language_model_picture("permutation", words_, [0, *positions])
    path = " -> ".join(["<s>", *(words_[p - 1] for p in positions)])
    return MaskPicture(
        m,
        words_,
        ["<s>", *words_],
        f"permutation LM, order {path}",
        note="the same as the causal mask with rows and columns shuffled into the order",
    )


def draw_prefix(
    source: str = "what do you want to eat", target: str = "white cut chicken"
) -> MaskPicture:
    """UniLM's seq2seq mask on [CLS] source [SEP] target [SEP] (Su 2019's right figure)."""
    src, tgt = ["[CLS]", *source.split(), "[SEP]"], [*target.split(), "[SEP]"]
    tokens = src + tgt
    segment_ids = [0] * len(src) + [1] * len(tgt)
    rule = _variant_rule("prefix", segment_ids, list(range(len(tokens))))
    m = mask_picture(rule, len(tokens), len(tokens))
    note = "segment 0 = [CLS] source [SEP], segment 1 = target [SEP]"
    return MaskPicture(
        m, tokens, tokens, "UniLM seq2seq: bidirectional source, causal target", note=note
    )


def hicmlm_masked_slots(length: int, iterations: int, iteration: int, seed: int = 0) -> Tensor:
    """The slots masked at pass ``iteration`` of mask-predict (Ghazvininejad et al. 2019,
    section 3.1), chosen uniformly with a seed since a picture has no confidences."""
    if not 0 <= iteration < iterations:
        raise ValueError(
            f"--iteration must be in 0..{iterations - 1} (0-based pass of --iterations "
            f"{iterations}), got {iteration}"
        )
    count = length * (iterations - iteration) // iterations
    g = torch.Generator().manual_seed(seed)
    chosen = torch.randperm(length, generator=g)[:count]
    masked = torch.zeros(length, dtype=torch.bool)
    masked[chosen] = True
    return masked


def draw_hicmlm(
    length: int = 12,
    iterations: int = 10,
    iteration: int = 2,
    mask_weight: float = HiCMLMConfig.mask_weight,
    seed: int = 0,
) -> MaskPicture:
    """HI-CMLM's decoder input per hybrid strategy (rows) and slot (columns) at one pass."""
    if length < 1 or iterations < 1:
        raise ValueError("--length and --iterations must be >= 1")
    words = hicmlm_masked_slots(length, iterations, iteration, seed)
    masked = torch.zeros(1, length + 2, dtype=torch.bool)  # <s> and </s> are never masked
    masked[0, 1:-1] = words
    rows = []
    for strategy in HYBRID_STRATEGIES:
        w = source_copy_weight(masked, strategy, mask_weight, HiCMLMConfig.fence_first)[0]
        code = torch.where(w >= 1.0, 2, torch.where(w > 0.0, 3, 1))
        rows.append(torch.where(masked[0], code, 0))
    cols = ["<s>", *(f"y{i}" for i in range(1, length + 1)), "</s>"]
    return MaskPicture(
        torch.stack(rows),
        list(HYBRID_STRATEGIES),
        cols,
        f"HI-CMLM decoder input, pass {iteration + 1} of {iterations}: "
        f"{int(words.sum())} of {length} slots masked",
        legend=DECODER_INPUT_LEGEND,
        xlabel="decoder input slot (fairseq index)",
        ylabel="--hybrid-strategy",
        note=f"masked slots: a seeded random choice (seed {seed}) standing in for the "
        "least confident tokens",
    )


def draw_ngram(length: int = 5, ngram: int = ProphetNetConfig.ngram) -> MaskPicture:
    """ProphetNet's n-stream self-attention (``predicates.ngram_stream``)."""
    if length < 1 or ngram < 1:
        raise ValueError(f"--length and --ngram must be >= 1, got {length} and {ngram}")
    size = (1 + ngram) * length
    m = mask_picture(predicates.ngram_stream(length), size, size)
    names = ["h"] + [f"s{k}" for k in range(1, ngram + 1)]
    labels = [f"{name}_{t}" for name in names for t in range(length)]
    return MaskPicture(
        m,
        labels,
        labels,
        f"ProphetNet n-stream self-attention, n = {ngram}",
        note="h = main stream, sk = predicting stream k (predicts the token k - 1 "
        "after the next one); parameters are shared between streams",
    )


WORDS = {"words": "space-separated words"}
SCRIPTS: dict[str, Script] = {
    "bidirectional": Script(draw_bidirectional, "BERT: everyone sees everyone", WORDS),
    "causal": Script(draw_causal, "left-to-right LM (lower triangle)", WORDS),
    "permutation": Script(
        draw_permutation,
        "XLNet's permutation LM for one factorisation order",
        {
            **WORDS,
            "order": "1-based word positions in generation order",
            "seed": "draw a random order with this seed instead of --order",
        },
    ),
    "prefix": Script(
        draw_prefix,
        "UniLM seq2seq (prefix LM) from segment ids",
        {"source": "source words", "target": "target words"},
    ),
    "hicmlm": Script(
        draw_hicmlm,
        "HI-CMLM decoder input of each hybrid strategy at one mask-predict pass",
        {
            "length": "target length L",
            "iterations": "decoder passes T",
            "iteration": "0-based pass t; L*(T-t)/T slots are masked",
            "mask_weight": "M weight of weighted_sum",
            "seed": "seed of the masked-slot choice",
        },
    ),
    "ngram": Script(
        draw_ngram,
        "ProphetNet's main stream and n predicting streams",
        {"length": "target positions T", "ngram": "predicting streams n"},
    ),
}


def render_text(picture: MaskPicture) -> str:
    """A terminal rendering: one character per cell, columns numbered and listed."""
    chars = [c for _, c, _ in picture.legend]
    width = max(len(r) for r in picture.rows)
    lines = [picture.title, ""]
    tens = "".join(str(j // 10) if j >= 10 else " " for j in range(len(picture.cols)))
    if tens.strip():
        lines.append(" " * (width + 2) + " ".join(tens))
    lines.append(" " * (width + 2) + " ".join(str(j % 10) for j in range(len(picture.cols))))
    for label, row in zip(picture.rows, picture.matrix.tolist()):
        lines.append(label.rjust(width) + "  " + " ".join(chars[v] for v in row))
    lines += [
        "",
        f"rows: {picture.ylabel}; columns: {picture.xlabel}:",
        "  " + " ".join(f"{j}={c}" for j, c in enumerate(picture.cols)),
        "legend: " + ", ".join(f"{c} {label}" for label, c, _ in picture.legend),
    ]
    if picture.note:
        lines.append(f"note: {picture.note}")
    return "\n".join(lines)


def render_png(picture: MaskPicture, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    colours = [c for _, _, c in picture.legend]
    R, C = picture.matrix.shape
    fig, ax = plt.subplots(figsize=(max(3.5, 0.3 * C + 2.0), max(2.5, 0.3 * R + 1.5)))
    ax.imshow(
        picture.matrix.numpy(), cmap=ListedColormap(colours), vmin=-0.5, vmax=len(colours) - 0.5
    )
    ax.set_xticks(range(C), picture.cols, rotation=60, ha="right")
    ax.set_yticks(range(R), picture.rows)
    ax.set_xticks([x - 0.5 for x in range(1, C)], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, R)], minor=True)
    ax.grid(which="minor", color="#bbbbbb", linewidth=0.6)
    ax.tick_params(which="minor", length=0)
    ax.set(xlabel=picture.xlabel, ylabel=picture.ylabel)
    title = picture.title + (f"\n({picture.note})" if picture.note else "")
    ax.set_title(title, fontsize=9)
    used = sorted(set(picture.matrix.flatten().tolist()))
    ax.legend(
        handles=[
            Patch(facecolor=colours[v], edgecolor="#888888", label=picture.legend[v][0])
            for v in used
        ],
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=8,
        frameon=False,
    )
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def draw(name: str, **options) -> MaskPicture:
    """The picture of script ``name`` with ``options`` (its defaults for the others)."""
    if name not in SCRIPTS:
        raise ValueError(f"unknown mask {name!r}; choose one of {', '.join(SCRIPTS)}")
    return SCRIPTS[name].draw(**options)


def main(argv: list[str] | None = None) -> None:
    p = command_parser("python -m fairseq_ext.analysis.draw_mask", __doc__)
    p.add_argument("mask", nargs="?", choices=list(SCRIPTS), help="which mask to draw")
    p.add_argument("--png", help="also write the picture as a PNG here")
    p.add_argument(
        "--all", metavar="DIR", help="write every mask with its defaults to DIR/NAME.png"
    )
    p.add_argument("--verbose", action="store_true", help=quiet.VERBOSE_HELP)
    added = set()  # an option that several masks take is listed once, with the first of them
    for name, script in SCRIPTS.items():
        group = p.add_argument_group(f"{name} options")
        defaults = inspect.signature(script.draw).parameters
        for option, help_text in script.options.items():
            if option not in added:
                added.add(option)
                default = defaults[option].default
                group.add_argument(
                    "--" + option.replace("_", "-"),
                    type=type(default),
                    default=None,
                    help=f"{help_text} (default {default})",
                )
    args = p.parse_args(argv)
    if args.all:
        os.makedirs(args.all, exist_ok=True)
        for name in SCRIPTS:
            path = os.path.join(args.all, f"{name}.png")
            render_png(draw(name), path)
            print(f"wrote {path}")
        return
    if args.mask is None:
        p.error("name a mask to draw, or pass --all DIR")
    options = {
        k: getattr(args, k) for k in SCRIPTS[args.mask].options if getattr(args, k) is not None
    }
    try:
        picture = draw(args.mask, **options)
    except ValueError as exc:
        p.exit(2, f"{p.prog}: error: {exc}\n")
    print(render_text(picture))
    if args.png:
        render_png(picture, args.png)
        print(f"wrote {args.png}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()

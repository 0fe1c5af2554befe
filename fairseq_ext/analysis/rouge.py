"""ROUGE-1/2/L F1 with Google's ``rouge-score`` package (a maintained re-implementation of
ROUGE-1.5.5), the one scorer of every headline-generation example of the plugin, so that
ProphetNet, UniLM and Transformer rows are comparable.

    python -m fairseq_ext.analysis.rouge --hyp HYP.txt --ref REF.txt \\
        [--source ARTICLES.txt [--lead 8]] [--json OUT.json]

Settings: ``rouge1``, ``rouge2`` and sentence-level ``rougeL`` (not ``rougeLsum``), Porter
stemming on, rouge-score's default tokenizer (lowercase, split on non-alphanumerics, so the
'#' digit placeholders of Gigaword are dropped on both sides). Scores are the mean F1 over
sentences, times 100. Values differ slightly from the Perl ROUGE-1.5.5 (files2rouge) that
papers report; compare rows of this table with each other.

``--source`` (the articles, aligned with the references) also scores the lead-N baseline
beside the hypotheses: each article's first N words (``--lead``, default 8), the baseline a
headline model must beat (Rush et al. 2015, section 7). The OOV markers of the Gigaword
releases, ``UNK`` and ``<unk>``, are the same word ``unk`` to this tokenizer.
"""

from __future__ import annotations

import json
import sys

from rouge_score import rouge_scorer

from fairseq_ext.common.cli import command_parser

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")


def f1_sums(hypotheses: list[str], references: list[str]) -> dict[str, float]:
    """Sums over sentences of the ROUGE-1/2/L F1 (0-1), so that parts scored apart add up."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)
    totals = dict.fromkeys(ROUGE_TYPES, 0.0)
    for hyp, ref in zip(hypotheses, references):
        scores = scorer.score(ref, hyp)
        for t in ROUGE_TYPES:
            totals[t] += scores[t].fmeasure
    return totals


def rouge_f1(hypotheses: list[str], references: list[str]) -> dict[str, float]:
    """Mean sentence-level F1 x 100 for ROUGE-1, ROUGE-2 and ROUGE-L."""
    totals = f1_sums(hypotheses, references)
    if not references:
        raise ValueError("no sentences to score")
    return {t: 100.0 * v / len(references) for t, v in totals.items()}


def lead(article: str, n: int) -> str:
    """The first ``n`` whitespace-separated words of ``article``."""
    return " ".join(article.split()[:n])


def _read_lines(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def _line(scores: dict[str, float]) -> str:
    return " ".join(f"{t.upper().replace('ROUGE', 'ROUGE-')}={v:.2f}" for t, v in scores.items())


def main(argv: list[str] | None = None) -> None:
    p = command_parser("python -m fairseq_ext.analysis.rouge", __doc__)
    p.add_argument("--hyp", required=True, help="one hypothesis per line")
    p.add_argument("--ref", required=True, help="one reference per line, aligned with --hyp")
    p.add_argument("--json", help="also write the scores here")
    p.add_argument(
        "--source", help="the articles, aligned with --ref: also score the lead-N baseline"
    )
    p.add_argument("--lead", type=int, default=8, help="N of the lead-N baseline (default 8)")
    args = p.parse_args(argv)
    if args.lead < 1:
        p.error(f"--lead {args.lead}: the baseline needs at least 1 word")
    try:
        hyps, refs = _read_lines(args.hyp), _read_lines(args.ref)
        scores = rouge_f1(hyps, refs)
        if args.source:
            articles = _read_lines(args.source)
            if len(articles) != len(refs):
                raise ValueError(f"{len(articles)} articles in --source for {len(refs)} references")
            baseline = rouge_f1([lead(a, args.lead) for a in articles], refs)
    except OSError as exc:
        p.exit(2, f"error: cannot read {exc.filename}: {exc.strerror}\n")
    except ValueError as exc:
        p.exit(2, f"error: {exc} ({args.hyp} vs {args.ref})\n")
    print(f"{_line(scores)} (F1 x 100, rouge-score, stemmed, {len(refs)} sentences)")
    out = {"sentences": len(refs), **scores}
    if args.source:
        print(f"{_line(baseline)} lead-{args.lead} (the first {args.lead} words of each article)")
        out[f"lead{args.lead}"] = baseline
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    sys.stdout.flush()


if __name__ == "__main__":
    main()

"""Tokenized BLEU as Mask-Predict (Ghazvininejad et al. 2019) and HI-CMLM (Wang et al. 2021)
report it on WMT14 En-De: hypotheses and references Moses-tokenized
(sacremoses, the maintained port of Moses' ``tokenizer.perl -l LANG``), German compounds split
at their hyphens (``rich-text`` -> ``rich ##AT##-##AT## text``, the convention of
tensor2tensor's ``get_ende_bleu.sh`` and fairseq's ``scripts/compound_split_bleu.sh``), then
corpus BLEU on those tokens (sacreBLEU with ``tokenize="none"``, as ``multi-bleu.perl``).

    python -m fairseq_ext.analysis.tokenized_bleu REF HYP --lang de [--into BLEU_JSON]

prints the score as JSON; ``--into`` adds it as ``"tokenized"`` to the JSON that ``sacrebleu
-m bleu`` wrote, so that a recipe's ``bleu.json`` holds both scores.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import sacrebleu

from fairseq_ext.common.cli import command_parser

COMPOUND = re.compile(r"(\S)-(\S)")
COMPOUND_SPLIT_LANGS = ("de",)


def compound_split(line: str) -> str:
    """``perl -ple 's{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g'``: matches do not overlap, so
    ``a-b-c`` becomes ``a ##AT##-##AT## b-c`` as in the published scores."""
    return COMPOUND.sub(r"\1 ##AT##-##AT## \2", line)


def tokenize(lines: list[str], lang: str) -> list[str]:
    """Moses tokenization of ``lines`` in ``lang``, compounds split where ``lang`` is German."""
    from sacremoses import MosesTokenizer

    moses = MosesTokenizer(lang=lang)
    out = [moses.tokenize(line.strip(), return_str=True) for line in lines]
    return [compound_split(line) for line in out] if lang in COMPOUND_SPLIT_LANGS else out


def tokenized_bleu(hypotheses: list[str], references: list[str], lang: str) -> dict:
    """``{"score", "signature"}`` of the tokenized BLEU of detokenized ``hypotheses``."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    metric = sacrebleu.BLEU(tokenize="none", force=True)
    score = metric.corpus_score(tokenize(hypotheses, lang), [tokenize(references, lang)])
    split = "yes" if lang in COMPOUND_SPLIT_LANGS else "no"
    return {
        "score": round(score.score, 2),
        "signature": f"moses:{lang}|compound-split:{split}|{metric.get_signature()}",
    }


def main(argv: list[str] | None = None) -> int:
    p = command_parser("python -m fairseq_ext.analysis.tokenized_bleu", __doc__)
    p.add_argument("ref", type=Path, help="references, one a line (detokenized text)")
    p.add_argument("hyp", type=Path, help="hypotheses, one a line (detokenized text)")
    p.add_argument("--lang", required=True, help="the target language (Moses' -l)")
    p.add_argument("--into", type=Path, help="the bleu.json of sacrebleu -m bleu to add it to")
    a = p.parse_args(argv)
    refs, hyps = (f.read_text(encoding="utf-8").splitlines() for f in (a.ref, a.hyp))
    try:
        result = tokenized_bleu(hyps, refs, a.lang)
    except ValueError as exc:
        print(f"error: {a.hyp}: {exc} in {a.ref}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as exc:
        if exc.name != "sacremoses":
            raise
        print(
            "error: tokenized BLEU needs sacremoses: pip install 'fairseq_ext[eval]'",
            file=sys.stderr,
        )
        return 1
    if a.into:
        scores = json.loads(a.into.read_text(encoding="utf-8"))
        scores["tokenized"] = result
        a.into.write_text(json.dumps(scores, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

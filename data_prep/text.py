#!/usr/bin/env python
"""Small text filters for the data_prep scripts (stdin -> stdout).

python data_prep/text.py unescape            # &apos; &quot; &amp; ... -> characters (Moses escapes)
python data_prep/text.py sgm                 # the <seg> lines of a WMT .sgm file, as text
python data_prep/text.py romanian [--keep-diacritics]
    WMT16 Romanian normalisation: cedilla s/t (U+015F, U+0163, and capitals) -> comma-below
    (U+0219, U+021B), typographic quotes -> ASCII; then, unless --keep-diacritics, remove the
    diacritics (a-breve, a-circumflex, i-circumflex, s/t-comma) as the standard WMT16 En-Ro
    NAT setups do (Gu et al. 2018; Ghazvininejad et al. 2019).
python data_prep/text.py gigaword-style [--wikitext] [FILE ...]
    English text in the style of Gigaword's articles, for span pre-training beside them
    (examples/prophetnet/gigaword.sh --pretrain-text): Moses escapes undone, lowercased,
    digits as '#', paragraphs cut into lines of at most 100 words, lines under 3 words
    dropped; --wikitext also drops WikiText's headings and blank lines and joins its
    @-@ @,@ @.@ separators. Reads the FILEs (.gz too) or stdin.
"""

from __future__ import annotations

import argparse
import gzip
import html
import re
import sys
import unicodedata

_CEDILLA_TO_COMMA = str.maketrans(
    {"\u015f": "\u0219", "\u015e": "\u0218", "\u0163": "\u021b", "\u0162": "\u021a"}
)
_QUOTES = str.maketrans(
    {
        "\u201e": '"',
        "\u201d": '"',
        "\u201c": '"',
        "\u00ab": '"',
        "\u00bb": '"',
        "\u2019": "'",
        "\u2018": "'",
        "\u2013": "-",
        "\u2014": "-",
    }
)
_SEG = re.compile(r"<seg[^>]*>(.*)</seg>", re.IGNORECASE)


def normalise_romanian(line: str) -> str:
    return line.translate(_CEDILLA_TO_COMMA).translate(_QUOTES)


def remove_diacritics(line: str) -> str:
    decomposed = unicodedata.normalize("NFD", line)
    return unicodedata.normalize(
        "NFC", "".join(c for c in decomposed if unicodedata.category(c) != "Mn")
    )


LINE_WORDS = 100  # longer paragraphs (WikiText) are cut into lines of at most this many words


def gigaword_style(line: str, wikitext: bool) -> list[str]:
    """One line of English text as lines in Gigaword's style (lowercase, digits as '#', Moses
    escapes undone), cut into lines of at most ``LINE_WORDS`` words, none under 3 words; with
    ``wikitext`` its headings and blank lines dropped and its @-@ separators joined."""
    line = line.strip()
    if wikitext:
        if not line or (line.startswith("=") and line.endswith("=")):
            return []
        line = line.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".")
    words = re.sub(r"[0-9]", "#", html.unescape(line).lower()).split()
    return [
        " ".join(words[i : i + LINE_WORDS])
        for i in range(0, len(words), LINE_WORDS)
        if len(words[i : i + LINE_WORDS]) >= 3
    ]


def read_text(path: str):
    """The lines of a text file, gzipped or not."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        yield from f


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("unescape")
    sub.add_parser("sgm")
    ro = sub.add_parser("romanian")
    ro.add_argument("--keep-diacritics", action="store_true")
    style = sub.add_parser("gigaword-style")
    style.add_argument("--wikitext", action="store_true")
    style.add_argument("files", nargs="*")
    args = p.parse_args(argv)
    if args.cmd == "gigaword-style":
        for path in args.files:
            try:
                open(path, "rb").close()
            except OSError as e:
                p.error(f"cannot read {path}: {e.strerror}")
        lines = (x for path in args.files for x in read_text(path)) if args.files else sys.stdin
        for line in lines:
            for out in gigaword_style(line, args.wikitext):
                sys.stdout.write(out + "\n")
        return
    for line in sys.stdin:
        line = line.rstrip("\n")
        if args.cmd == "unescape":
            out = html.unescape(line)
        elif args.cmd == "sgm":
            m = _SEG.search(line)
            if not m:
                continue
            out = html.unescape(m.group(1)).strip()
        else:
            out = normalise_romanian(line)
            if not args.keep_diacritics:
                out = remove_diacritics(out)
        sys.stdout.write(out + "\n")


if __name__ == "__main__":
    main()

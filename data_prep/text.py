#!/usr/bin/env python
"""Small text filters for the data_prep scripts (stdin -> stdout).

    python data_prep/text.py unescape            # &apos; &quot; &amp; ... -> characters (Moses escapes)
    python data_prep/text.py sgm                 # the <seg> lines of a WMT .sgm file, as text
    python data_prep/text.py romanian [--keep-diacritics]
        WMT16 Romanian normalisation: cedilla s/t (U+015F, U+0163, and capitals) -> comma-below
        (U+0219, U+021B), typographic quotes -> ASCII; then, unless --keep-diacritics, remove the
        diacritics (a-breve, a-circumflex, i-circumflex, s/t-comma) as the standard WMT16 En-Ro
        NAT setups do (Gu et al. 2018; Ghazvininejad et al. 2019).
"""
from __future__ import annotations

import argparse
import html
import re
import sys
import unicodedata

_CEDILLA_TO_COMMA = str.maketrans({"\u015f": "\u0219", "\u015e": "\u0218", "\u0163": "\u021b", "\u0162": "\u021a"})
_QUOTES = str.maketrans({"\u201e": '"', "\u201d": '"', "\u201c": '"', "\u00ab": '"', "\u00bb": '"',
                         "\u2019": "'", "\u2018": "'", "\u2013": "-", "\u2014": "-"})
_SEG = re.compile(r"<seg[^>]*>(.*)</seg>", re.IGNORECASE)


def normalise_romanian(line: str) -> str:
    return line.translate(_CEDILLA_TO_COMMA).translate(_QUOTES)


def remove_diacritics(line: str) -> str:
    decomposed = unicodedata.normalize("NFD", line)
    return unicodedata.normalize("NFC", "".join(c for c in decomposed if unicodedata.category(c) != "Mn"))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("unescape")
    sub.add_parser("sgm")
    ro = sub.add_parser("romanian")
    ro.add_argument("--keep-diacritics", action="store_true")
    args = p.parse_args(argv)
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

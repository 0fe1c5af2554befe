#!/usr/bin/env bash
# Your own parallel corpus (any file names): raw text -> joint sentencepiece -> fairseq binary.
#   data_prep/parallel.sh --src L1 --tgt L2 --train-src FILE --train-tgt FILE
#       --valid-src FILE --valid-tgt FILE [--test-src FILE --test-tgt FILE] [--out DIR]
#       [--vocab 8000]
# Each FILE is plain or gzipped UTF-8 text, one sentence a line; line n of a --*-src file
# translates line n of its --*-tgt file. L1 and L2 name the sides in the binary files (the
# -s and -t of fairseq's commands). Training pairs with an empty side are dropped; the
# validation and test pairs are kept as given (raw copies in OUT/raw/{valid,test}.L).
# --vocab: one sentencepiece vocabulary for both sides; it must fit the text (3,000 Multi30k
#   pairs hold at most 6154 pieces; a larger value is refused in one line naming what fits):
#   1000 for a few thousand pairs (docs/own-corpus.md), 32000 for millions.
source "$(dirname "$0")/common.sh"

OUT="data/parallel" SRC="" TGT="" VOCAB=8000
declare -A FILE=()
while [ $# -gt 0 ]; do
  case "$1" in
    --src) SRC="$2"; shift 2 ;;
    --tgt) TGT="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --vocab) VOCAB="$2"; shift 2 ;;
    --train-src|--train-tgt|--valid-src|--valid-tgt|--test-src|--test-tgt)
      [ $# -ge 2 ] || die "$1 needs a file"; FILE[${1#--}]="$2"; shift 2 ;;
    *) die "unknown option $1 (see: bash $0 --help)" ;;
  esac
done
[ -n "$SRC" ] && [ -n "$TGT" ] || die "give the two sides' names: --src L1 --tgt L2 (e.g. --src en --tgt de)"
[ "$SRC" != "$TGT" ] || die "--src and --tgt are both $SRC; give the two sides different names"
for k in train-src train-tgt valid-src valid-tgt; do
  [ -n "${FILE[$k]:-}" ] || die "--$k FILE is missing (see: bash $0 --help)"
done
if [ -n "${FILE[test-src]:-}${FILE[test-tgt]:-}" ]; then
  [ -n "${FILE[test-src]:-}" ] && [ -n "${FILE[test-tgt]:-}" ] || die "give both --test-src and --test-tgt, or neither"
fi
for k in "${!FILE[@]}"; do [ -s "${FILE[$k]}" ] || die "--$k ${FILE[$k]}: no such file, or it is empty"; done
check_utf8 "${FILE[@]}"

RAW="$OUT/raw"; mkdir -p "$RAW"
for split in train valid test; do
  [ -n "${FILE[$split-src]:-}" ] || continue
  read_text "${FILE[$split-src]}" > "$RAW/$split.txt.$SRC"
  read_text "${FILE[$split-tgt]}" > "$RAW/$split.txt.$TGT"
  n=$(wc -l < "$RAW/$split.txt.$SRC") m=$(wc -l < "$RAW/$split.txt.$TGT")
  [ "$n" = "$m" ] || die "--$split-src has $n lines, --$split-tgt $m; line n of one must translate line n of the other"
done
"$PYTHON" "$DATA_PREP_DIR/spm.py" clean-pair "$RAW/train.txt.$SRC" "$RAW/train.txt.$TGT" \
  "$RAW/train.$SRC" "$RAW/train.$TGT"
TEST=""
for split in valid test; do
  [ -s "$RAW/$split.txt.$SRC" ] || continue
  for l in "$SRC" "$TGT"; do mv "$RAW/$split.txt.$l" "$RAW/$split.$l"; done
  [ "$split" = test ] && TEST="$RAW/test"
done
spm_and_binarize "$OUT" "$SRC" "$TGT" "$VOCAB" "$RAW/train" "$RAW/valid" "$TEST"

#!/usr/bin/env bash
# Multi30k Task 1 (Elliott et al. 2016), raw cased text -> sentencepiece -> fairseq binary.
#   data_prep/multi30k.sh [--local DIR] [--out DIR] [--src en] [--tgt de] [--vocab 8000]
# --local DIR: a folder with train.{en,de}[.gz] and val.{en,de}[.gz] (and optionally
#              test_2016_flickr.*), as in the dataset's repository. Without it the files are
#              downloaded from github.com/multi30k/dataset.
# Licence: for non-commercial research and educational use (see the dataset's README).
source "$(dirname "$0")/common.sh"

LOCAL="" OUT="data/multi30k" SRC=en TGT=de VOCAB=8000
while [ $# -gt 0 ]; do
  case "$1" in
    --local) LOCAL="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --src) SRC="$2"; shift 2 ;;
    --tgt) TGT="$2"; shift 2 ;;
    --vocab) VOCAB="$2"; shift 2 ;;
    *) die "unknown option $1 (see: bash $0 --help)" ;;
  esac
done

mkdir -p "$OUT/raw"
URL=https://github.com/multi30k/dataset/raw/master/data/task1/raw
find_split() {  # find_split NAME LANG -> path of NAME.LANG or NAME.LANG.gz
  local d="$1" name="$2" l="$3"
  for f in "$d/$name.$l" "$d/$name.$l.gz"; do [ -s "$f" ] && { echo "$f"; return 0; }; done
  return 0
}
for l in "$SRC" "$TGT"; do
  for split in train val test_2016_flickr; do
    if [ -n "$LOCAL" ]; then
      f=$(find_split "$LOCAL" "$split" "$l")
      [ -n "$f" ] || { [ "$split" = test_2016_flickr ] && continue; die "$LOCAL has no $split.$l[.gz]"; }
    else
      f="$OUT/raw/$split.$l.gz"; fetch "$URL/$split.$l.gz" "$f"
    fi
    check_utf8 "$f"
    read_text "$f" > "$OUT/raw/$split.$l.txt"
  done
done

"$PYTHON" "$DATA_PREP_DIR/spm.py" clean-pair "$OUT/raw/train.$SRC.txt" "$OUT/raw/train.$TGT.txt" \
  "$OUT/raw/train.clean.$SRC" "$OUT/raw/train.clean.$TGT"
for split in val test_2016_flickr; do
  [ -s "$OUT/raw/$split.$SRC.txt" ] || continue
  for l in "$SRC" "$TGT"; do cp "$OUT/raw/$split.$l.txt" "$OUT/raw/$split.$l"; done
done
TEST=""
[ -s "$OUT/raw/test_2016_flickr.$SRC" ] && TEST="$OUT/raw/test_2016_flickr"
spm_and_binarize "$OUT" "$SRC" "$TGT" "$VOCAB" "$OUT/raw/train.clean" "$OUT/raw/val" "$TEST"

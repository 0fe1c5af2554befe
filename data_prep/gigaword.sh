#!/usr/bin/env bash
# Gigaword headline generation (Rush et al. 2015), harvardnlp sent-summary format:
# one article / title per line, lowercased, PTB-tokenised, digits as '#'.
#   data_prep/gigaword.sh [--local DIR] [--out DIR] [--vocab 10000]
#                         [--train PREFIX] [--valid PREFIX] [--test PREFIX] [--raw-only]
# --local DIR: a folder with PREFIX.article.txt / PREFIX.title.txt pairs (default prefixes
#   train10k and valid1k, a 10k/1k sample; the full release names them
#   train and valid.filter). Without --local the harvardnlp archive is downloaded (the copy
#   the Hugging Face `gigaword` loader uses) and train / valid.filter / the 1951-pair test
#   set are taken from it.
# OOV markers differ between releases ('UNK' in the test set, '<unk>' in train/valid): both
# become the single token 'UNK', which sentencepiece keeps whole (user-defined symbol).
# Output: OUT/raw/{train,valid[,test]}.{article,title}, OUT/spm.model, OUT/bin (joined
# dictionary, source 'article', target 'title') and OUT/bin-article (article side only, for
# denoising pre-training). --raw-only stops after OUT/raw (for a checkpoint's own tokenizer,
# e.g. examples/pretrained/minilm_gigaword.sh).
source "$(dirname "$0")/common.sh"

LOCAL="" OUT="data/gigaword" VOCAB=10000 TRAIN="" VALID="" TEST="" RAW_ONLY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --local) LOCAL="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --vocab) VOCAB="$2"; shift 2 ;;
    --train) TRAIN="$2"; shift 2 ;;
    --valid) VALID="$2"; shift 2 ;;
    --test) TEST="$2"; shift 2 ;;
    --raw-only) RAW_ONLY=1; shift ;;
    *) die "unknown option $1 (see: bash $0 --help)" ;;
  esac
done
mkdir -p "$OUT/raw"

if [ -z "$LOCAL" ]; then
  URL="https://drive.google.com/uc?export=download&id=1USoQ8lJgN8kAWnUnRrupMGrPMLlDVqlV"
  fetch "$URL" "$OUT/raw/sumdata.tar.gz"
  tar -xzf "$OUT/raw/sumdata.tar.gz" -C "$OUT/raw"
  LOCAL="$OUT/raw/sumdata/train"
  TRAIN="${TRAIN:-train}" VALID="${VALID:-valid.filter}"
  if [ -s "$OUT/raw/sumdata/Giga/input.txt" ]; then
    cp "$OUT/raw/sumdata/Giga/input.txt" "$OUT/raw/test.article.txt"
    cp "$OUT/raw/sumdata/Giga/task1_ref0.txt" "$OUT/raw/test.title.txt"
    TEST_DIR="$OUT/raw" TEST="${TEST:-test}"
  fi
fi
if [ -s "$LOCAL/train10k.article.txt" ]; then TRAIN="${TRAIN:-train10k}"; VALID="${VALID:-valid1k}"; fi
TRAIN="${TRAIN:-train}" VALID="${VALID:-valid.filter}"
TEST_DIR="${TEST_DIR:-$LOCAL}"

normalise() { sed -e 's/<unk>/UNK/g' -e 's/[[:space:]]\+/ /g' -e 's/^ //' -e 's/ $//' "$1"; }
for side in article title; do
  [ -s "$LOCAL/$TRAIN.$side.txt" ] || die "$LOCAL has no $TRAIN.$side.txt"
  [ -s "$LOCAL/$VALID.$side.txt" ] || die "$LOCAL has no $VALID.$side.txt"
  check_utf8 "$LOCAL/$TRAIN.$side.txt" "$LOCAL/$VALID.$side.txt"
  normalise "$LOCAL/$TRAIN.$side.txt" > "$OUT/raw/train.all.$side"
  normalise "$LOCAL/$VALID.$side.txt" > "$OUT/raw/valid.$side"
  if [ -n "$TEST" ]; then
    [ -s "$TEST_DIR/$TEST.$side.txt" ] || die "$TEST_DIR has no $TEST.$side.txt"
    check_utf8 "$TEST_DIR/$TEST.$side.txt"
    normalise "$TEST_DIR/$TEST.$side.txt" > "$OUT/raw/test.$side"
  fi
done
"$PYTHON" "$DATA_PREP_DIR/spm.py" clean-pair "$OUT/raw/train.all.article" "$OUT/raw/train.all.title" \
  "$OUT/raw/train.article" "$OUT/raw/train.title"
if [ "$RAW_ONLY" = 1 ]; then
  echo "Gigaword: $(wc -l < "$OUT/raw/train.article") training pairs, $(wc -l < "$OUT/raw/valid.article") validation pairs in $OUT/raw" >&2
  exit 0
fi

TESTPREF=""
[ -n "$TEST" ] && TESTPREF="$OUT/raw/test"
if [ ! -s "$OUT/spm.model" ]; then
  "$PYTHON" "$DATA_PREP_DIR/spm.py" train --model "$OUT/spm" --vocab-size "$VOCAB" \
    --user-defined-symbols UNK "$OUT/raw/train.article" "$OUT/raw/train.title"
fi
spm_and_binarize "$OUT" article title "$VOCAB" "$OUT/raw/train" "$OUT/raw/valid" "$TESTPREF"

preprocess "$OUT/bin-article" "$OUT/preprocess-article.log" --only-source --source-lang article \
  --trainpref "$OUT/spm/train" --validpref "$OUT/spm/valid" --srcdict "$OUT/bin/dict.article.txt" --workers 2
echo "Gigaword: $(wc -l < "$OUT/raw/train.article") training pairs, $(wc -l < "$OUT/raw/valid.article") validation pairs in $OUT" >&2

#!/usr/bin/env bash
# WMT16 English-Romanian -> Romanian normalisation -> joint sentencepiece -> fairseq binary.
#   data_prep/wmt16_en_ro.sh [--local DIR] [--out DIR] [--vocab 32000] [--keep-diacritics]
# Romanian side: cedilla s/t become comma-below and quotes ASCII (Europarl and newsdev mix the
# two styles), then diacritics are removed unless --keep-diacritics (data_prep/text.py).
# Online (no --local): Europarl v8 + SETimes2 (610k pairs), newsdev2016 (valid) and
#   newstest2016 (test), from statmt.org and OPUS.
# --local DIR: a folder with train10k.europarl.{en,ro} (a 10k-pair sample of Europarl)
#   and newsdev2016.{en,ro} (valid); no test split is read from it.
# Other file names (your own corpus): data_prep/parallel.sh (docs/own-corpus.md).
source "$(dirname "$0")/common.sh"

LOCAL="" OUT="data/wmt16_en_ro" VOCAB=32000 ROARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --local) LOCAL="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --vocab) VOCAB="$2"; shift 2 ;;
    --keep-diacritics) ROARGS=(--keep-diacritics); shift ;;
    *) die "unknown option $1 (see: bash $0 --help)" ;;
  esac
done
RAW="$OUT/raw"; mkdir -p "$RAW"
TXT="$PYTHON $DATA_PREP_DIR/text.py"
TEST=""
if [ -n "$LOCAL" ]; then
  [ -s "$LOCAL/train10k.europarl.en" ] || die "$LOCAL has no train10k.europarl.en"
  check_utf8 "$LOCAL"/train10k.europarl.{en,ro} "$LOCAL"/newsdev2016.{en,ro}
  cp "$LOCAL/train10k.europarl.en" "$RAW/train.raw.en"; cp "$LOCAL/train10k.europarl.ro" "$RAW/train.raw.ro"
  cp "$LOCAL/newsdev2016.en" "$RAW/valid.en"; cp "$LOCAL/newsdev2016.ro" "$RAW/valid.raw.ro"
else
  fetch http://data.statmt.org/wmt16/translation-task/training-parallel-ep-v8.tgz "$RAW/ep.tgz"
  fetch https://object.pouta.csc.fi/OPUS-SETIMES/v2/moses/en-ro.txt.zip "$RAW/setimes.zip"
  fetch http://data.statmt.org/wmt16/translation-task/dev-romanian-updated.tgz "$RAW/dev.tgz"
  fetch http://data.statmt.org/wmt16/translation-task/test.tgz "$RAW/test.tgz"
  tar -xzf "$RAW/ep.tgz" -C "$RAW"; tar -xzf "$RAW/dev.tgz" -C "$RAW"; tar -xzf "$RAW/test.tgz" -C "$RAW"
  (cd "$RAW" && unzip -oq setimes.zip)
  check_utf8 "$RAW"/training-parallel-ep-v8/europarl-v8.ro-en.{en,ro} "$RAW"/SETIMES.en-ro.{en,ro}
  cat "$RAW/training-parallel-ep-v8/europarl-v8.ro-en.en" "$RAW/SETIMES.en-ro.en" > "$RAW/train.raw.en"
  cat "$RAW/training-parallel-ep-v8/europarl-v8.ro-en.ro" "$RAW/SETIMES.en-ro.ro" > "$RAW/train.raw.ro"
  $TXT sgm < "$RAW/dev/newsdev2016-enro-src.en.sgm" > "$RAW/valid.en"
  $TXT sgm < "$RAW/dev/newsdev2016-enro-ref.ro.sgm" > "$RAW/valid.raw.ro"
  $TXT sgm < "$RAW/test/newstest2016-enro-src.en.sgm" > "$RAW/test.en"
  $TXT sgm < "$RAW/test/newstest2016-enro-ref.ro.sgm" > "$RAW/test.raw.ro"
  $TXT romanian "${ROARGS[@]}" < "$RAW/test.raw.ro" > "$RAW/test.ro"
  TEST="$RAW/test"
fi
$TXT romanian "${ROARGS[@]}" < "$RAW/train.raw.ro" > "$RAW/train.norm.ro"
$TXT romanian "${ROARGS[@]}" < "$RAW/valid.raw.ro" > "$RAW/valid.ro"
"$PYTHON" "$DATA_PREP_DIR/spm.py" clean-pair "$RAW/train.raw.en" "$RAW/train.norm.ro" \
  "$RAW/train.en" "$RAW/train.ro" --max-words 250
spm_and_binarize "$OUT" en ro "$VOCAB" "$RAW/train" "$RAW/valid" "$TEST"

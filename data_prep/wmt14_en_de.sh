#!/usr/bin/env bash
# WMT14 English-German -> joint sentencepiece -> fairseq binary (joined dictionary).
#   data_prep/wmt14_en_de.sh [--local DIR] [--out DIR] [--vocab 32000] [--with-extra-dev]
# Online (no --local): Europarl v7 + Common Crawl + News Commentary v9 from statmt.org
#   (4.5M pairs), newstest2013 (valid) and newstest2014 (test) from the WMT14 test package.
# --local DIR: a folder with opennmt_tok/train10k.tok.{en,de}
#   (10k WMT14 training pairs, Moses-tokenised and XML-escaped: unescaped here) and
#   newstest2013.{en,de} (valid); --with-extra-dev adds news-test2008 .. newstest2011 as
#   in-domain training pairs (newstest2012 is left out: it overlaps OpenNMT's valid set).
#   No test split is read from DIR; decode newstest2013 there.
# Other file names (your own corpus): data_prep/parallel.sh (docs/own-corpus.md).
source "$(dirname "$0")/common.sh"

LOCAL="" OUT="data/wmt14_en_de" VOCAB=32000 EXTRA=0
while [ $# -gt 0 ]; do
  case "$1" in
    --local) LOCAL="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --vocab) VOCAB="$2"; shift 2 ;;
    --with-extra-dev) EXTRA=1; shift ;;
    *) die "unknown option $1 (see: bash $0 --help)" ;;
  esac
done
RAW="$OUT/raw"; mkdir -p "$RAW"
TXT="$PYTHON $DATA_PREP_DIR/text.py"
: > "$RAW/train.all.en"; : > "$RAW/train.all.de"
TEST=""
if [ -n "$LOCAL" ]; then
  [ -s "$LOCAL/opennmt_tok/train10k.tok.en" ] || die "$LOCAL has no opennmt_tok/train10k.tok.en"
  check_utf8 "$LOCAL"/opennmt_tok/train10k.tok.{en,de} "$LOCAL"/newstest2013.{en,de}
  for l in en de; do $TXT unescape < "$LOCAL/opennmt_tok/train10k.tok.$l" >> "$RAW/train.all.$l"; done
  if [ "$EXTRA" = 1 ]; then
    for y in news-test2008 newstest2009 newstest2010 newstest2011; do
      check_utf8 "$LOCAL/extra_dev_2008_2012/$y".{en,de}
      for l in en de; do cat "$LOCAL/extra_dev_2008_2012/$y.$l" >> "$RAW/train.all.$l"; done
    done
  fi
  for l in en de; do cp "$LOCAL/newstest2013.$l" "$RAW/valid.$l"; done
else
  S=http://statmt.org
  fetch $S/wmt13/training-parallel-europarl-v7.tgz "$RAW/europarl.tgz"
  fetch $S/wmt13/training-parallel-commoncrawl.tgz "$RAW/commoncrawl.tgz"
  fetch $S/wmt14/training-parallel-nc-v9.tgz "$RAW/nc.tgz"
  fetch $S/wmt14/test-full.tgz "$RAW/test.tgz"
  fetch http://data.statmt.org/wmt17/translation-task/dev.tgz "$RAW/dev.tgz"
  for f in europarl commoncrawl nc test dev; do tar -xzf "$RAW/$f.tgz" -C "$RAW"; done
  for c in training/europarl-v7.de-en commoncrawl.de-en training/news-commentary-v9.de-en; do
    check_utf8 "$RAW/$c".{en,de}
    for l in en de; do cat "$RAW/$c.$l" >> "$RAW/train.all.$l"; done
  done
  for l in en de; do
    $TXT sgm < "$RAW/dev/newstest2013-src.$l.sgm" > "$RAW/valid.$l"
  done
  $TXT sgm < "$RAW/test-full/newstest2014-deen-src.en.sgm" > "$RAW/test.en"
  $TXT sgm < "$RAW/test-full/newstest2014-deen-ref.de.sgm" > "$RAW/test.de"
  TEST="$RAW/test"
fi
"$PYTHON" "$DATA_PREP_DIR/spm.py" clean-pair "$RAW/train.all.en" "$RAW/train.all.de" \
  "$RAW/train.en" "$RAW/train.de" --max-words 250
spm_and_binarize "$OUT" en de "$VOCAB" "$RAW/train" "$RAW/valid" "$TEST"

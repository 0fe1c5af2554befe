#!/usr/bin/env bash
# WikiText-2 (raw) -> sentencepiece -> fairseq-preprocess --only-source, for masked LM
# pre-training (task position_masked_lm or fairseq's masked_lm).
#
#   bash data_prep/wikitext2.sh [--local FILE_OR_DIR] [--out DIR] [--vocab N] [--raw-only]
#
# Online (no --local): downloads wikitext-2-raw-v1.zip (Merity et al. 2016) and uses its
#   wiki.train.raw / wiki.valid.raw / wiki.test.raw as train / valid / test.
# --local DIR with wiki.train.raw and wiki.valid.raw: the same, offline (wiki.test.raw too
#   if present).
# --local FILE (e.g. wiki.valid.raw alone, when only that split is at hand): the file is
#   split by article into train and valid. Articles start at a " = Title = " line; the
#   last tenth of the articles (at least one) is valid, the rest train, so that no article
#   is in both. No test split is made.
# Blank lines are dropped (WikiText's paragraph separators); headings stay as lines.
# Output: OUT/raw/{train,valid[,test]}.txt, OUT/spm.model, OUT/bin (dict.txt and the
# binarized splits). --raw-only stops after OUT/raw (for a checkpoint's own tokenizer, e.g.
# examples/pretrained/minilm_position_masking.sh).
source "$(dirname "$0")/common.sh"

LOCAL="" OUT="data/wikitext2" VOCAB=8000 RAW_ONLY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --local) LOCAL="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --vocab) VOCAB="$2"; shift 2 ;;
    --raw-only) RAW_ONLY=1; shift ;;
    *) die "unknown option $1 (see: bash $0 --help)" ;;
  esac
done
mkdir -p "$OUT/raw"
# drop_blank IN OUT: the lines of IN that are not blank or whitespace-only, with a printed count
drop_blank() {
  grep -v '^[[:space:]]*$' "$1" > "$2" || true
  echo "$1: dropped $(( $(wc -l < "$1") - $(wc -l < "$2") )) blank or whitespace-only lines" >&2
}

if [ -z "$LOCAL" ]; then
  fetch "https://wikitext.smerity.com/wikitext-2-raw-v1.zip" "$OUT/raw/wikitext-2-raw-v1.zip"
  command -v unzip >/dev/null || die "unzip is needed to open $OUT/raw/wikitext-2-raw-v1.zip"
  unzip -oq "$OUT/raw/wikitext-2-raw-v1.zip" -d "$OUT/raw"
  LOCAL="$OUT/raw/wikitext-2-raw"
fi

if [ -d "$LOCAL" ]; then
  for s in train valid; do
    [ -s "$LOCAL/wiki.$s.raw" ] || die "$LOCAL has no wiki.$s.raw (pass --local FILE to split one file)"
    check_utf8 "$LOCAL/wiki.$s.raw"
    drop_blank "$LOCAL/wiki.$s.raw" "$OUT/raw/$s.txt"
  done
  if [ -s "$LOCAL/wiki.test.raw" ]; then
    check_utf8 "$LOCAL/wiki.test.raw"
    drop_blank "$LOCAL/wiki.test.raw" "$OUT/raw/test.txt"
  fi
elif [ -s "$LOCAL" ]; then
  check_utf8 "$LOCAL"
  articles=$(grep -c '^ = [^=].* = $' "$LOCAL" || true)
  [ "$articles" -ge 2 ] || die "$LOCAL has $articles article headings (' = Title = '); need >= 2 to split"
  valid=$(( (articles + 5) / 10 )); [ "$valid" -ge 1 ] || valid=1
  first_valid=$(( articles - valid + 1 ))
  awk -v fv="$first_valid" -v tr="$OUT/raw/train.txt" -v va="$OUT/raw/valid.txt" '
    /^ = [^=].* = $/ { n++ }
    /^[[:space:]]*$/ { blank++; next }
    { if (n >= fv) print > va; else print > tr }
    END { printf "%s: dropped %d blank or whitespace-only lines\n", FILENAME, blank > "/dev/stderr" }' "$LOCAL"
  echo "split $LOCAL by article: $(( articles - valid )) articles train, $valid valid" >&2
else
  die "--local $LOCAL is neither a directory nor a file"
fi
rm -f "$OUT/raw/wikitext-2-raw-v1.zip"
if [ "$RAW_ONLY" = 1 ]; then
  echo "WikiText-2: $(wc -l < "$OUT/raw/train.txt") training lines, $(wc -l < "$OUT/raw/valid.txt") validation lines in $OUT/raw" >&2
  exit 0
fi

if [ ! -s "$OUT/spm.model" ]; then
  "$PYTHON" "$DATA_PREP_DIR/spm.py" train --model "$OUT/spm" --vocab-size "$VOCAB" "$OUT/raw/train.txt"
fi
mkdir -p "$OUT/spm"
args=()
for s in train valid test; do
  [ -s "$OUT/raw/$s.txt" ] || continue
  # without a language suffix, fairseq-preprocess reads the prefix itself as the file
  "$PYTHON" "$DATA_PREP_DIR/spm.py" encode --model "$OUT/spm.model" < "$OUT/raw/$s.txt" > "$OUT/spm/$s"
  args+=("--${s}pref" "$OUT/spm/$s")
done
preprocess "$OUT/bin" "$OUT/preprocess.log" --only-source "${args[@]}" --workers 2
echo "WikiText-2: $(wc -l < "$OUT/raw/train.txt") training lines, $(wc -l < "$OUT/raw/valid.txt") validation lines; binarized in $OUT/bin" >&2

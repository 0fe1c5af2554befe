#!/usr/bin/env bash
# Writes examples/quickstart/data/train.distilled.de: the shipped teacher's beam-5 translations
# of the sample's 3,000 training sentences (data_prep/distill.sh --teacher model/teacher.pt).
# The shipped student was trained on such distilled targets (pretrain.sh; the targets
# non-autoregressive translation is trained on, Gu et al. 2018, section 3.2), so `make quickstart`
# continues it on them rather than on the human references.
#   examples/quickstart/distill_sample.sh [--work DIR]
# About 12 minutes of 2 CPU cores (the teacher's beam search); writes the file in place.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
WORK="$ROOT/work/quickstart-distill"
while [ $# -gt 0 ]; do
  case "$1" in
    --work) [ $# -ge 2 ] || { echo "error: --work needs a folder" >&2; exit 2; }; WORK="$2"; shift 2 ;;
    *) echo "error: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
MODEL="$HERE/model" DATA="$HERE/data"
rm -rf "$WORK"; mkdir -p "$WORK/spm"
for split in train valid; do
  for l in en de; do
    python "$ROOT/data_prep/spm.py" encode --model "$MODEL/spm.model" < "$DATA/$split.$l" > "$WORK/spm/$split.$l"
  done
done
fairseq-preprocess -s en -t de --trainpref "$WORK/spm/train" --validpref "$WORK/spm/valid" \
  --srcdict "$MODEL/dict.txt" --joined-dictionary --destdir "$WORK/bin" --workers 2 > "$WORK/preprocess.log" 2>&1 \
  || { tail -5 "$WORK/preprocess.log" >&2; exit 1; }
bash "$ROOT/data_prep/distill.sh" --data "$WORK/bin" --out "$WORK/distill" --teacher "$MODEL/teacher.pt" --beam 5
python "$ROOT/data_prep/spm.py" decode --model "$MODEL/spm.model" < "$WORK/distill/text/train.de" \
  > "$DATA/train.distilled.de"
[ "$(wc -l < "$DATA/train.distilled.de")" = "$(wc -l < "$DATA/train.en")" ] \
  || { echo "error: $(wc -l < "$DATA/train.distilled.de") distilled targets for $(wc -l < "$DATA/train.en") sentences" >&2; exit 1; }
echo "wrote $DATA/train.distilled.de ($(wc -l < "$DATA/train.en") teacher translations, beam 5)"

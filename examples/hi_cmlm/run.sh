#!/usr/bin/env bash
# Train one model on a fairseq binary folder, decode a split, score it (sacreBLEU, tokenized BLEU).
#   examples/hi_cmlm/run.sh --data BIN --work DIR [options]
# --model hi_cmlm (default) | cmlm (fairseq's cmlm_transformer, same task and data) | ar
#        (fairseq's autoregressive transformer, beam search)
# --strategy S        hybrid strategy of hi_cmlm: all_mask|all_copied|weighted_sum|fence_replace
# --train-input I     hi_cmlm training input: paper (default; HI-CMLM section 3.3, the same for
#                     every strategy) or decoding_rule (train with the strategy's decoding input)
# --copy-share P      with --train-input paper, the share of masked training slots given Z (0.5)
# --fence-first F     what the first target word gets under fence_replace: mask (paper) or copy
# --decode "S1 S2"    hi_cmlm: decode the trained model with each of these strategies
#                     (default: --strategy); cmlm and ar decode once
# --arch A            default hi_cmlm_transformer_tiny / cmlm_transformer / transformer
# --dims "ARGS"       size overrides passed to fairseq-train (default: none = the arch's sizes)
# --updates N | --hours H   training budget (default --updates 300000, the paper's)
# --lr, --warmup, --max-tokens, --update-freq, --dropout, --seed, --label-smoothing
# --init-encoder-from CKPT  initialise a NAT encoder from an autoregressive checkpoint
# --gen-subset S (default test), --ref FILE (raw reference of that split; else the T- lines)
# --iter N            decoder passes (default 10, i.e. fairseq's --iter-decode-max-iter N-1)
# --length-beam K     mask-predict length candidates (default 5); beam size for --model ar
# -s SRC -t TGT       languages (default en de)
# Writes DIR/checkpoints, DIR/train.log and, per decoding, DIR/decode-S/ (S = the strategy; "cmlm"
# or "ar" for those models) with generate.txt (with --retain-iter-history), hyp.txt and bleu.json
# (sacreBLEU score and signature; under "tokenized", BLEU on Moses tokens with German compounds
# split, as Mask-Predict and HI-CMLM report WMT14 En-De: fairseq_ext/analysis/tokenized_bleu.py).
# A finished training or decoding is not redone, so a driver that was stopped resumes where it was; a WORK trained with other settings (the budget included)
# is refused in one line, and a decoding with other --gen-subset, --ref, --iter or --length-beam
# is redone.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
source "$ROOT/examples/progress.sh"
source "$ROOT/examples/same_settings.sh"
DATA="" WORK="" MODEL=hi_cmlm STRATEGY=fence_replace ARCH="" DIMS="" UPDATES=300000 HOURS=""
LR=5e-4 WARMUP=10000 MAX_TOKENS=8192 UPDATE_FREQ=1 DROPOUT=0.3 SEED=1 LS=0.1 INIT="" GEN=test REF=""
ITER=10 LBEAM=5 SRC=en TGT=de TRAIN_INPUT=paper COPY_SHARE=0.5 FENCE_FIRST=mask DECODE=""
while [ $# -gt 0 ]; do
  case "$1" in
    --data) DATA="$2"; shift 2 ;;           --work) WORK="$2"; shift 2 ;;
    --model) MODEL="$2"; shift 2 ;;         --strategy) STRATEGY="$2"; shift 2 ;;
    --arch) ARCH="$2"; shift 2 ;;           --dims) DIMS="$2"; shift 2 ;;
    --updates) UPDATES="$2"; shift 2 ;;     --hours) HOURS="$2"; shift 2 ;;
    --lr) LR="$2"; shift 2 ;;               --warmup) WARMUP="$2"; shift 2 ;;
    --max-tokens) MAX_TOKENS="$2"; shift 2 ;; --update-freq) UPDATE_FREQ="$2"; shift 2 ;;
    --dropout) DROPOUT="$2"; shift 2 ;;     --seed) SEED="$2"; shift 2 ;;
    --label-smoothing) LS="$2"; shift 2 ;;  --init-encoder-from) INIT="$2"; shift 2 ;;
    --gen-subset) GEN="$2"; shift 2 ;;      --ref) REF="$2"; shift 2 ;;
    --iter) ITER="$2"; shift 2 ;;           --length-beam) LBEAM="$2"; shift 2 ;;
    -s) SRC="$2"; shift 2 ;;                -t) TGT="$2"; shift 2 ;;
    --train-input) TRAIN_INPUT="$2"; shift 2 ;; --copy-share) COPY_SHARE="$2"; shift 2 ;;
    --fence-first) FENCE_FIRST="$2"; shift 2 ;; --decode) DECODE="$2"; shift 2 ;;
    *) echo "error: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
[ -n "$DATA" ] && [ -n "$WORK" ] || { echo "error: --data and --work are required" >&2; exit 2; }
mkdir -p "$WORK"
BUDGET=(--max-update "$UPDATES")
[ -n "$HOURS" ] && BUDGET=(--stop-time-hours "$HOURS" --max-update 100000000)
# what the checkpoints of WORK were trained with: another call continues or decodes them only with the same
same_settings "$WORK/checkpoints" "a training" "data $DATA, $SRC-$TGT, --model $MODEL --strategy $STRATEGY \
--train-input $TRAIN_INPUT --copy-share $COPY_SHARE --fence-first $FENCE_FIRST --arch ${ARCH:-default} --dims '$DIMS' \
${BUDGET[*]} --lr $LR --warmup $WARMUP --max-tokens $MAX_TOKENS --update-freq $UPDATE_FREQ --dropout $DROPOUT \
--seed $SEED --label-smoothing $LS --init-encoder-from '$INIT'"
COMMON=(--user-dir "$ROOT/fairseq_ext" -s "$SRC" -t "$TGT")
OPT=(--optimizer adam --adam-betas '(0.9,0.98)' --lr "$LR" --lr-scheduler inverse_sqrt
     --warmup-updates "$WARMUP" --warmup-init-lr 1e-7 --clip-norm 1.0 --dropout "$DROPOUT"
     --max-tokens "$MAX_TOKENS" --update-freq "$UPDATE_FREQ" --seed "$SEED" --max-epoch 100000
     --save-dir "$WORK/checkpoints" --no-epoch-checkpoints --log-format simple --log-interval 100)
# shellcheck disable=SC2206
DIMS_ARR=($DIMS)

CKPT="$WORK/checkpoints/checkpoint_last.pt"
trained() {  # the last checkpoint exists and the log says training reached its budget
  [ -s "$CKPT" ] && grep -q "done training" "$WORK/train.log" 2>/dev/null
}
if [ "$MODEL" = ar ]; then
  trained || fairseq-train "$DATA" "${COMMON[@]}" --task translation --arch "${ARCH:-transformer}" "${DIMS_ARR[@]}" \
    --share-all-embeddings --criterion label_smoothed_cross_entropy --label-smoothing "$LS" \
    "${OPT[@]}" "${BUDGET[@]}" 2>&1 | fairseq_progress "$WORK/train.log" || { tail -20 "$WORK/train.log" >&2; exit 1; }
  DECODE_ARGS=(--task translation --beam "$LBEAM" --required-batch-size-multiple 1)
  DECODE="ar"
else
  case "$MODEL" in
    hi_cmlm) MARGS=(--arch "${ARCH:-hi_cmlm_transformer_tiny}" --hybrid-strategy "$STRATEGY"
                    --train-decoder-input "$TRAIN_INPUT" --train-copy-share "$COPY_SHARE"
                    --fence-first "$FENCE_FIRST")
             DECODE="${DECODE:-$STRATEGY}" ;;
    cmlm) MARGS=(--arch "${ARCH:-cmlm_transformer}"); DECODE="cmlm" ;;
    *) echo "error: --model must be hi_cmlm, cmlm or ar" >&2; exit 2 ;;
  esac
  [ -n "$INIT" ] && MARGS+=(--init-encoder-from "$INIT")
  trained || fairseq-train "$DATA" "${COMMON[@]}" --task cmlm_hybrid --noise random_mask "${MARGS[@]}" "${DIMS_ARR[@]}" \
    --criterion nat_loss --label-smoothing "$LS" "${OPT[@]}" "${BUDGET[@]}" \
    2>&1 | fairseq_progress "$WORK/train.log" || { tail -20 "$WORK/train.log" >&2; exit 1; }
  DECODE_ARGS=(--task cmlm_hybrid --iter-decode-max-iter "$((ITER - 1))" --iter-decode-with-beam "$LBEAM"
               --iter-decode-force-max-iter --retain-iter-history)
fi
grep -E "\| (train|valid) \|" "$WORK/train.log" | tail -2 | cut -c1-200

for S in $DECODE; do
  OUTD="$WORK/decode-$S"
  DECODED_WITH="--gen-subset $GEN --ref '$REF' --iter $ITER --length-beam $LBEAM"
  if [ -s "$OUTD/bleu.json" ]; then  # a decoding with other settings is redone, not reported as this one
    [ "$(cat "$OUTD/settings" 2>/dev/null)" = "$DECODED_WITH" ] && continue
    echo "$OUTD was decoded with other settings ($(cat "$OUTD/settings" 2>/dev/null || echo unknown)): decoding again"
  fi
  rm -rf "$OUTD"; mkdir -p "$OUTD"
  echo "$DECODED_WITH" > "$OUTD/settings"
  T0=$(date +%s)
  OVERRIDE=()
  [ "$MODEL" = hi_cmlm ] && OVERRIDE=(--model-overrides "{'hybrid_strategy': '$S'}")
  fairseq-generate "$DATA" "${COMMON[@]}" "${DECODE_ARGS[@]}" "${OVERRIDE[@]}" --path "$CKPT" \
    --gen-subset "$GEN" --batch-size 64 --post-process sentencepiece --log-format simple --log-interval 4 \
    2>&1 > "$OUTD/generate.txt" | fairseq_progress "$OUTD/generate.log" || { tail "$OUTD/generate.log" >&2; exit 1; }
  echo $(( $(date +%s) - T0 )) > "$OUTD/seconds"
  grep '^D-' "$OUTD/generate.txt" | sed 's/^D-//' | sort -n -k1,1 | cut -f3 > "$OUTD/hyp.txt"
  R="$REF"
  if [ -z "$R" ]; then
    R="$OUTD/ref.txt"
    grep '^T-' "$OUTD/generate.txt" | sed 's/^T-//' | sort -n -k1,1 | cut -f2 > "$R"
  fi
  [ "$(wc -l < "$OUTD/hyp.txt")" = "$(wc -l < "$R")" ] \
    || { echo "error: $(wc -l < "$OUTD/hyp.txt") hypotheses for $(wc -l < "$R") references" >&2; exit 1; }
  sacrebleu "$R" -i "$OUTD/hyp.txt" -m bleu > "$OUTD/bleu.json.part"
  python -m fairseq_ext.analysis.tokenized_bleu "$R" "$OUTD/hyp.txt" --lang "$TGT" --into "$OUTD/bleu.json.part" > /dev/null
  mv "$OUTD/bleu.json.part" "$OUTD/bleu.json"
  python -c "import json,sys; d=json.load(open(sys.argv[1])); t=d['tokenized']; print(f\"{sys.argv[2]}: BLEU {d['score']} ({d['signature']}); tokenized BLEU {t['score']} ({t['signature']})\")" \
    "$OUTD/bleu.json" "$OUTD"
done

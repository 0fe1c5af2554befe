#!/usr/bin/env bash
# Train one model on a fairseq binary folder, decode a split, score it with sacreBLEU.
#   examples/hi_cmlm/run.sh --data BIN --work DIR [options]
# --model hi_cmlm (default) | cmlm (fairseq's cmlm_transformer, same task and data) | ar
#        (fairseq's autoregressive transformer, beam search)
# --strategy S        hybrid strategy of hi_cmlm: all_mask|all_copied|weighted_sum|fence_replace
# --arch A            default hi_cmlm_transformer_tiny / cmlm_transformer / transformer
# --dims "ARGS"       size overrides passed to fairseq-train (default: none = the arch's sizes)
# --updates N | --hours H   training budget (default --updates 300000, the paper's)
# --lr, --warmup, --max-tokens, --update-freq, --dropout, --seed, --label-smoothing
# --init-encoder-from CKPT  initialise a NAT encoder from an autoregressive checkpoint
# --gen-subset S (default test), --ref FILE (raw reference of that split; else the T- lines)
# --iter N            decoder passes (default 10, i.e. fairseq's --iter-decode-max-iter N-1)
# --length-beam K     mask-predict length candidates (default 5); beam size for --model ar
# -s SRC -t TGT       languages (default en de)
# Writes DIR/checkpoints, DIR/generate.txt (with --retain-iter-history), DIR/hyp.txt,
# DIR/bleu.json (sacreBLEU score and signature).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DATA="" WORK="" MODEL=hi_cmlm STRATEGY=fence_replace ARCH="" DIMS="" UPDATES=300000 HOURS=""
LR=5e-4 WARMUP=10000 MAX_TOKENS=8192 UPDATE_FREQ=1 DROPOUT=0.3 SEED=1 LS=0.1 INIT="" GEN=test REF=""
ITER=10 LBEAM=5 SRC=en TGT=de
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
    *) echo "error: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
[ -n "$DATA" ] && [ -n "$WORK" ] || { echo "error: --data and --work are required" >&2; exit 2; }
mkdir -p "$WORK"
BUDGET=(--max-update "$UPDATES")
[ -n "$HOURS" ] && BUDGET=(--stop-time-hours "$HOURS" --max-update 100000000)
COMMON=(--user-dir "$ROOT/fairseq_ext" -s "$SRC" -t "$TGT")
OPT=(--optimizer adam --adam-betas '(0.9,0.98)' --lr "$LR" --lr-scheduler inverse_sqrt
     --warmup-updates "$WARMUP" --warmup-init-lr 1e-7 --clip-norm 1.0 --dropout "$DROPOUT"
     --max-tokens "$MAX_TOKENS" --update-freq "$UPDATE_FREQ" --seed "$SEED" --max-epoch 100000
     --save-dir "$WORK/checkpoints" --no-epoch-checkpoints --log-format simple --log-interval 100)
# shellcheck disable=SC2206
DIMS_ARR=($DIMS)

if [ "$MODEL" = ar ]; then
  fairseq-train "$DATA" "${COMMON[@]}" --task translation --arch "${ARCH:-transformer}" "${DIMS_ARR[@]}" \
    --share-all-embeddings --criterion label_smoothed_cross_entropy --label-smoothing "$LS" \
    "${OPT[@]}" "${BUDGET[@]}" > "$WORK/train.log" 2>&1 || { tail -20 "$WORK/train.log" >&2; exit 1; }
  DECODE=(--task translation --beam "$LBEAM" --required-batch-size-multiple 1)
else
  case "$MODEL" in
    hi_cmlm) MARGS=(--arch "${ARCH:-hi_cmlm_transformer_tiny}" --hybrid-strategy "$STRATEGY") ;;
    cmlm) MARGS=(--arch "${ARCH:-cmlm_transformer}") ;;
    *) echo "error: --model must be hi_cmlm, cmlm or ar" >&2; exit 2 ;;
  esac
  [ -n "$INIT" ] && MARGS+=(--init-encoder-from "$INIT")
  fairseq-train "$DATA" "${COMMON[@]}" --task cmlm_hybrid --noise random_mask "${MARGS[@]}" "${DIMS_ARR[@]}" \
    --criterion nat_loss --label-smoothing "$LS" "${OPT[@]}" "${BUDGET[@]}" \
    > "$WORK/train.log" 2>&1 || { tail -20 "$WORK/train.log" >&2; exit 1; }
  DECODE=(--task cmlm_hybrid --iter-decode-max-iter "$((ITER - 1))" --iter-decode-with-beam "$LBEAM"
          --iter-decode-force-max-iter --retain-iter-history)
fi
grep -E "\| (train|valid) \|" "$WORK/train.log" | tail -2 | cut -c1-200

fairseq-generate "$DATA" "${COMMON[@]}" "${DECODE[@]}" --path "$WORK/checkpoints/checkpoint_last.pt" \
  --gen-subset "$GEN" --batch-size 64 --post-process sentencepiece \
  > "$WORK/generate.txt" 2> "$WORK/generate.log" || { tail "$WORK/generate.log" >&2; exit 1; }
grep '^D-' "$WORK/generate.txt" | sed 's/^D-//' | sort -n -k1,1 | cut -f3 > "$WORK/hyp.txt"
if [ -z "$REF" ]; then
  REF="$WORK/ref.txt"
  grep '^T-' "$WORK/generate.txt" | sed 's/^T-//' | sort -n -k1,1 | cut -f2 > "$REF"
fi
[ "$(wc -l < "$WORK/hyp.txt")" = "$(wc -l < "$REF")" ] || { echo "error: $(wc -l < "$WORK/hyp.txt") hypotheses for $(wc -l < "$REF") references" >&2; exit 1; }
sacrebleu "$REF" -i "$WORK/hyp.txt" -m bleu > "$WORK/bleu.json"
python -c "import json,sys; d=json.load(open(sys.argv[1])); print(f\"{sys.argv[2]}: BLEU {d['score']} ({d['signature']})\")" \
  "$WORK/bleu.json" "$WORK"

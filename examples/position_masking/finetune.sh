#!/usr/bin/env bash
# Fine-tune a position_masked_roberta checkpoint with fairseq's own sentence_prediction task
# (the position head is dropped when the checkpoint is loaded; the log says so).
#   examples/position_masking/finetune.sh CHECKPOINT DATA_BIN SAVE_DIR [extra fairseq-train args...]
# CHECKPOINT "none": the same model trained from a random initialisation (the baseline that
#   tells what pre-training adds).
# DATA_BIN: input0/ [input1/] label/ as written by data_prep/word_order.py or headline_match.py.
# Environment (defaults in brackets): ST [0] (1: --attention-dropout-straight-through, the
#   paper's enhanced dropout gradient, section 2.2), ARCH [position_masked_roberta_tiny],
#   MAX_POSITIONS [128] (must equal the pre-training --tokens-per-sample), UPDATES [600],
#   BATCH [32], LR [5e-4] (for the tiny model), SEED [1].
# Writes SAVE_DIR/train.log; its last "valid" line has the accuracy.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 CHECKPOINT DATA_BIN SAVE_DIR [fairseq-train args...]" >&2; exit 2; }
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
source "$ROOT/examples/progress.sh"
CKPT="$1" DATA="$2" SAVE="$3"; shift 3
ARCH="${ARCH:-position_masked_roberta_tiny}" MAXPOS="${MAX_POSITIONS:-128}" UPDATES="${UPDATES:-600}"
BATCH="${BATCH:-32}" LR="${LR:-5e-4}" SEED="${SEED:-1}"
ST_ARGS=() START=()
[ "$CKPT" = none ] || START=(--restore-file "$CKPT" --reset-optimizer --reset-dataloader --reset-meters --reset-lr-scheduler)
[ "${ST:-0}" = 1 ] && ST_ARGS=(--attention-dropout-straight-through)
mkdir -p "$SAVE"
export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore}"
fairseq-train "$DATA" --user-dir "$ROOT/fairseq_ext" --task sentence_prediction --num-classes 2 \
  --init-token 0 --separator-token 2 --max-positions "$MAXPOS" --shorten-method truncate \
  --arch "$ARCH" "${ST_ARGS[@]}" --criterion sentence_prediction \
  "${START[@]}" \
  --optimizer adam --adam-betas '(0.9,0.98)' --adam-eps 1e-6 --weight-decay 0.1 --clip-norm 0.0 \
  --lr "$LR" --lr-scheduler polynomial_decay --warmup-updates $(( UPDATES / 16 + 1 )) \
  --total-num-update "$UPDATES" --max-update "$UPDATES" --batch-size "$BATCH" \
  --validate-interval-updates 200 --no-epoch-checkpoints --no-last-checkpoints \
  --best-checkpoint-metric accuracy --maximize-best-checkpoint-metric \
  --log-format simple --log-interval 50 --num-workers 0 --seed "$SEED" --save-dir "$SAVE" "$@" \
  2>&1 | fairseq_progress "$SAVE/train.log" || { tail -20 "$SAVE/train.log" >&2; exit 1; }
grep -o "dropped the pre-training position head[^)]*)" "$SAVE/train.log" | head -1 || true  # none: no head
grep -E "\| valid \|" "$SAVE/train.log" | tail -1 | cut -c1-200

#!/usr/bin/env bash
# Pre-train a position-masked LM (task position_masked_lm) on a binarized monolingual set.
#   examples/position_masking/pretrain.sh DATA_BIN SAVE_DIR [extra fairseq-train args...]
# Environment (defaults in brackets):
#   PROB [0.10]      --position-mask-prob (0 = without position masking: fairseq's masked_lm)
#   ARCH [position_masked_roberta_tiny]   UPDATES [500]   TOKENS_PER_SAMPLE [128]
#   BATCH [16]       LR [1e-3]            SEED [1]
# Writes SAVE_DIR/train.log (fairseq's simple log format, read by plot.py) and
# SAVE_DIR/checkpoint_last.pt; then validates the last checkpoint once more with the
# positions left intact (--position-mask-prob 0) into SAVE_DIR/valid_clean.log.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 DATA_BIN SAVE_DIR [fairseq-train args...]" >&2; exit 2; }
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
source "$ROOT/examples/progress.sh"
DATA="$1" SAVE="$2"; shift 2
PROB="${PROB:-0.10}" ARCH="${ARCH:-position_masked_roberta_tiny}" UPDATES="${UPDATES:-500}"
TPS="${TOKENS_PER_SAMPLE:-128}" BATCH="${BATCH:-16}" LR="${LR:-1e-3}" SEED="${SEED:-1}"
WARMUP=$(( UPDATES / 16 + 1 ))
mkdir -p "$SAVE"
export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore}"
fairseq-train "$DATA" --user-dir "$ROOT/fairseq_ext" --task position_masked_lm \
  --arch "$ARCH" --criterion position_masked_lm --position-mask-prob "$PROB" \
  --tokens-per-sample "$TPS" --sample-break-mode none --batch-size "$BATCH" \
  --optimizer adam --adam-betas '(0.9,0.98)' --adam-eps 1e-6 --weight-decay 0.01 --clip-norm 1.0 \
  --lr "$LR" --lr-scheduler polynomial_decay --warmup-updates "$WARMUP" --total-num-update "$UPDATES" \
  --max-update "$UPDATES" --validate-interval-updates 100 \
  --no-epoch-checkpoints --log-format simple --log-interval 25 --num-workers 0 --seed "$SEED" \
  --save-dir "$SAVE" "$@" 2>&1 | fairseq_progress "$SAVE/train.log" || { tail -20 "$SAVE/train.log" >&2; exit 1; }
fairseq-validate "$DATA" --user-dir "$ROOT/fairseq_ext" --task position_masked_lm \
  --path "$SAVE/checkpoint_last.pt" --batch-size "$BATCH" --num-workers 0 \
  --model-overrides "{'position_mask_prob': 0.0}" > "$SAVE/valid_clean.log" 2>&1 \
  || { tail -20 "$SAVE/valid_clean.log" >&2; exit 1; }
grep -E "\| valid \|" "$SAVE/train.log" | tail -1 | cut -c1-220

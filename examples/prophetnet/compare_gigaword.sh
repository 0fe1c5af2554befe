#!/usr/bin/env bash
# ProphetNet vs Transformer vs UniLM on Gigaword (README, Results, table 2): ROUGE-1/2/L F1 on
# the 1000 validation pairs for ProphetNet with --ngram 1 (plain next-token), 2 and 3, each
# without and with span-masking pre-training on the article side, fairseq's plain Transformer
# of the same sizes, and the UniLM prefix-mask model of about the same size (6 x 256 against
# ProphetNet's 3+3 x 256). Same data, sentencepiece vocabulary (10k), fine-tuning budget,
# batch size, beam 4, length penalty 1.0, no-repeat-ngram 3 and ROUGE scorer for every row.
#
#   examples/prophetnet/compare_gigaword.sh [--scale cpu|full] [--work DIR] [--only "NAMES"]
#       [--finetune-updates N] [--pretrain-updates N] [--no-publish]
# --scale cpu (default): 500 fine-tuning and 150 pre-training updates of 2048 tokens, 48
#   minutes on 2 CPU cores (a comparison of early training, not of converged models);
#   full: 3000 and 1000 updates of 4096 tokens (a GPU, or a long CPU run).
# --finetune-updates / --pretrain-updates: other budgets than the scale's (use another --work).
# --only: a subset of run names (p1 p2 p3 p1-pt p2-pt p3-pt transformer unilm); finished runs
#   (DIR/runs/NAME/results.json) are not run again.
# Writes DIR/results.json, DIR/results.md and DIR/rouge.png (collect_gigaword.py), copied to
# examples/prophetnet/ (results.json, results.md, figures/gigaword_rouge.png) unless
# --no-publish; each run's own results.json (commands, wall time, hardware) stays in
# DIR/runs/NAME.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
WORK="$ROOT/work/gigaword-comparison" SCALE=cpu ONLY="p1 p2 p3 p1-pt p2-pt p3-pt transformer unilm"
FT_SET="" PT_SET="" PUBLISH=(--publish "$HERE")
while [ $# -gt 0 ]; do
  case "$1" in
    --scale) SCALE="$2"; shift 2 ;; --work) WORK="$2"; shift 2 ;; --only) ONLY="$2"; shift 2 ;;
    --finetune-updates) FT_SET="$2"; shift 2 ;; --pretrain-updates) PT_SET="$2"; shift 2 ;;
    --no-publish) PUBLISH=(); shift ;;
    *) echo "error: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
case "$SCALE" in
  cpu) FT=500 PT=150 TOK=2048 ;;
  full) FT=3000 PT=1000 TOK=4096 ;;
  *) echo "error: --scale must be cpu or full" >&2; exit 2 ;;
esac
FT="${FT_SET:-$FT}" PT="${PT_SET:-$PT}"
[[ "$FT" =~ ^[1-9][0-9]*$ && "$PT" =~ ^[1-9][0-9]*$ ]] \
  || { echo "error: --finetune-updates and --pretrain-updates must be integers >= 1" >&2; exit 2; }
DATA="$ROOT/../shared/data/gigaword"
DATA_ARGS=()
[ -d "$DATA" ] && DATA_ARGS=(--data "$DATA")
mkdir -p "$WORK/runs"
START=$(date +%s)
for name in $ONLY; do
  out="$WORK/runs/$name"
  [ -s "$out/results.json" ] && continue
  echo "== $name"
  case "$name" in
    p[123]) bash "$HERE/gigaword.sh" "${DATA_ARGS[@]}" --prep "$WORK/data" --work "$out" --ngram "${name#p}" \
              --pretrain-updates 0 --finetune-updates "$FT" --max-tokens "$TOK" ;;
    p[123]-pt) n="${name#p}"; bash "$HERE/gigaword.sh" "${DATA_ARGS[@]}" --prep "$WORK/data" --work "$out" \
              --ngram "${n%-pt}" --pretrain-updates "$PT" --finetune-updates "$FT" --max-tokens "$TOK" ;;
    transformer) bash "$HERE/gigaword.sh" "${DATA_ARGS[@]}" --prep "$WORK/data" --work "$out" --model transformer \
              --finetune-updates "$FT" --max-tokens "$TOK" ;;
    unilm) bash "$ROOT/examples/unilm/gigaword.sh" "${DATA_ARGS[@]}" --out "$out" --layers 6 --dim 256 --ffn 1024 \
              --heads 4 --updates "$FT" --warmup 200 --lr 7e-4 --max-tokens "$TOK" --no-repeat-ngram 3 ;;
    *) echo "error: unknown run $name" >&2; exit 2 ;;
  esac
done
python "$HERE/collect_gigaword.py" --work "$WORK" --scale "$SCALE" "${PUBLISH[@]}"
echo "$(( $(date +%s) - START )) s for this call"

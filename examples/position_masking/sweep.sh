#!/usr/bin/env bash
# The paper's percentage sweep (section 5.1, Figure 7) at equal budgets: the same data,
# model, seed and number of updates for --position-mask-prob 0, 0.05, 0.10 and 0.15 (0 is
# "without position masking", 0.10 the paper's default "with"), run one after another.
#   examples/position_masking/sweep.sh [--work DIR] [--wikitext FILE_OR_DIR] [--probs "0 0.05 0.10 0.15"]
# Environment: UPDATES, ARCH, ... as in pretrain.sh. Writes WORK/runs/p*/train.log, the
# plots WORK/mlm_accuracy.png and WORK/position_accuracy.png, and WORK/results.{json,md}.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
WORK="$ROOT/work/position_masking" WIKI="$ROOT/../shared/data/wikitext-2-raw/wiki.valid.raw"
PROBS="0 0.05 0.10 0.15"
while [ $# -gt 0 ]; do
  case "$1" in
    --work) WORK="$2"; shift 2 ;;
    --wikitext) WIKI="$2"; shift 2 ;;
    --probs) PROBS="$2"; shift 2 ;;
    *) echo "error: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
LOCAL=()
[ -e "$WIKI" ] && LOCAL=(--local "$WIKI")
[ -s "$WORK/data/bin/dict.txt" ] || bash "$ROOT/data_prep/wikitext2.sh" "${LOCAL[@]}" --out "$WORK/data"
RUNS=()
for p in $PROBS; do
  echo "== --position-mask-prob $p"
  PROB="$p" nice -n 10 bash "$HERE/pretrain.sh" "$WORK/data/bin" "$WORK/runs/p$p"
  RUNS+=("$p=$WORK/runs/p$p")
done
python "$HERE/plot.py" --out "$WORK" "${RUNS[@]}"

#!/usr/bin/env bash
# Why does ProphetNet n = 2 write one headline for every article after 500 updates? The
# bisection of docs/results/prophetnet.md (table 2): the same n = 2 run (seed, 500 updates of 2048
# tokens, Adam 7e-4, inverse square root after 200 warm-up updates, label smoothing 0.1, clip
# 1.0) with one part swapped at a time, each scored at 250 and 500 updates (ROUGE-1/2/L,
# distinct headlines, per-stream validation accuracy) by reference_transformers.py.
#
#   reproduction/prophetnet/bisect.sh [--work DIR] [--data DIR] [--seeds "1"] [--only "NAMES"] [--jobs 2]
#       [--threads N] [--no-publish]
# --data DIR: a local Gigaword in the harvardnlp layout (data_prep/gigaword.sh --local); without
#   it data_prep/gigaword.sh downloads it.
# --jobs J runs J variants side by side with 2/J threads each (--threads N overrides).
# NAMES (default all):
#   hf              transformers' ProphetNet, predicting-stream layout corrected, its own
#                   initialisation and loss, on fairseq's batches
#   hf-as-released  the same with transformers' layout left as released
#   ours            this plugin's prophetnet in the same loop (its initialisation, ngram_language_loss)
#   ours-unsorted   the same on unsorted batches (pairs in a random order, no length buckets)
#   hf-unsorted     transformers' model on unsorted batches
#   ours-fairseq-unsorted  this plugin's prophetnet in the loop on the batches of fairseq-train
#                   --unsorted-batches (fairseq's batch iterator over the task's random order)
# Resumable (each variant and seed is DIR/NAME-sSEED/results.json; table 2's kept fairseq-train
# runs reproduction/prophetnet/runs/{sorted,unsorted}/p2-sSEED are its first rows; a variant with no
# run in DIR keeps its row from the published bisection.json). Writes DIR/bisection.json and the block of
# docs/results/prophetnet.md between <!-- bisection:start --> and <!-- bisection:end -->
# (collect_gigaword.py --bisection), and copies bisection.json to reproduction/prophetnet/ unless --no-publish;
# batch_stats.py writes batch_stats.json and the <!-- batches:start --> block the same way.
# Cost on 2 CPU cores with --jobs 2: about 12 minutes per variant of this plugin and 20 per
# transformers variant.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"  # the collectors import reproduction.*
WORK="$ROOT/work/gigaword-comparison/bisect" SEEDS=1 JOBS=2 THREADS="" DATA="" ONLY="hf hf-as-released ours ours-unsorted hf-unsorted ours-fairseq-unsorted"
PUBLISH=(--publish "$HERE" --page "$ROOT/docs/results/prophetnet.md")
die() { echo "error: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --work) WORK="$2"; shift 2 ;; --data) DATA="$2"; shift 2 ;; --seeds) SEEDS="$2"; shift 2 ;; --only) ONLY="$2"; shift 2 ;;
    --jobs) JOBS="$2"; shift 2 ;; --threads) THREADS="$2"; shift 2 ;; --no-publish) PUBLISH=(); shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
for n in $SEEDS $JOBS; do [[ "$n" =~ ^[0-9]+$ ]] || die "--seeds and --jobs take whole numbers, got '$n'"; done
[ "$JOBS" -ge 1 ] || die "--jobs must be >= 1"
PREP="$ROOT/work/gigaword-comparison/data"
if [ ! -s "$PREP/bin/dict.article.txt" ]; then
  if [ -n "$DATA" ]; then bash "$ROOT/data_prep/gigaword.sh" --local "$DATA" --out "$PREP"
  else bash "$ROOT/data_prep/gigaword.sh" --out "$PREP"; fi
fi
mkdir -p "$WORK"
JOBLIST="$WORK/jobs.txt"
: > "$JOBLIST"
for name in $ONLY; do
  case "$name" in
    hf) opts="--model transformers" ;;
    hf-as-released) opts="--model transformers --layout as-released" ;;
    ours) opts="--model fairseq_ext" ;;
    ours-unsorted) opts="--model fairseq_ext --batching unsorted" ;;
    hf-unsorted) opts="--model transformers --batching unsorted" ;;
    ours-fairseq-unsorted) opts="--model fairseq_ext --batching fairseq-unsorted" ;;
    *) die "unknown variant $name (see --help)" ;;
  esac
  for seed in $SEEDS; do
    echo "$name-s$seed python $HERE/reference_transformers.py $PREP/bin --refs $PREP/raw/valid.title --out $WORK/$name-s$seed --ngram 2 --seed $seed --updates 500 --eval-at 250 500 $opts" >> "$JOBLIST"
  done
done
THREADS="${THREADS:-$(( 2 / JOBS > 0 ? 2 / JOBS : 1 ))}"
export THREADS PYTHONWARNINGS="${PYTHONWARNINGS:-ignore}" WORK
status=0
xargs -r -P "$JOBS" -d '\n' -n 1 bash -c 'set -- $1; name=$1; shift; echo "== start $name";
  if OMP_NUM_THREADS=$THREADS "$@" >> "$WORK/$name.log" 2>&1; then echo "== done  $name";
  else echo "== FAILED $name (see $WORK/$name.log)"; exit 1; fi' _ < "$JOBLIST" || status=1
python "$HERE/collect_gigaword.py" --bisection "$WORK" "${PUBLISH[@]}"
# What the batches hold under each way of cutting them (batch_stats.py; the last bisection step).
if [ ${#PUBLISH[@]} -gt 0 ]; then
  python "$HERE/batch_stats.py" "$PREP/bin" --out "$HERE/batch_stats.json" --page "$ROOT/docs/results/prophetnet.md"
else
  python "$HERE/batch_stats.py" "$PREP/bin" --out "$WORK/batch_stats.json"
fi
exit "$status"

#!/usr/bin/env bash
# Table 2 (docs/results/prophetnet.md): ProphetNet n = 1, 2, 3 (and n = 2 with the paper's
# attenuation gamma = 0.5) against fairseq's plain Transformer of the same sizes and against
# transformers' ProphetNet trained on the same batches (reference_transformers.py), each with
# several seeds and scored at several points of training: ROUGE-1/2/L F1 and distinct
# headlines on the 1000 Gigaword validation pairs, and per-stream validation accuracy. One
# seed each of the span pre-training rows (ProphetNet + MASS-style pre-training on the
# articles); the UniLM prefix-mask model with every seed. Same data (sentencepiece 10k), batch size,
# optimiser, schedule, beam 4, lenpen 1.0, no-repeat-ngram 3 and ROUGE scorer for every row.
#
#   reproduction/prophetnet/compare_gigaword.sh [--seeds "1 2 3"] [--updates 1000]
#       [--eval-at "250 500 1000"] [--max-tokens 2048] [--pretrain-updates 150] [--jobs 2]
#       [--batching unsorted|sorted] [--only "NAMES"] [--work DIR] [--data DIR] [--no-publish]
# --data DIR: a local Gigaword in the harvardnlp layout (data_prep/gigaword.sh --local); without
#   it data_prep/gigaword.sh downloads it (the unilm row reads the raw files, so it needs --data).
# NAMES (default all): transformer p1 p2 p2-g0.5 p3 ref-p1 ref-p2 p2-m1 unilm (one run per seed;
#   UniLM scored at --updates only) and p1-pt p2-pt p3-pt (the first seed only). p2-m1:
#   n = 2 on batches not rounded down to a multiple of 8 pairs (gigaword.sh --batch-multiple 1),
#   as the reference loop's batches are.
# --batching: unsorted (default) cuts the fine-tuning batches from the pairs in a random order
#   (translation_prophetnet and unilm_seq2seq --unsorted-batches, reference_transformers.py
#   --batching unsorted);
#   sorted uses fairseq's length-sorted batches, under which n >= 2 writes one headline for
#   every article in most seeds at this scale (bisect.sh; docs/results/prophetnet.md, "Why n = 2
#   writes one headline").
# Resumable across sessions: each run works in DIR/runs/NAME-sSEED (ignored) and, once finished,
#   its results.json and gzipped hypotheses are kept in reproduction/prophetnet/runs/BATCHING/
#   NAME-sSEED (committed); a run whose kept results hold every --eval-at point is skipped,
#   and the table is collected from the kept runs. A larger --updates continues a run from its
#   last checkpoint when DIR still holds it, else retrains it (same seed, same batches).
# --jobs J: runs side by side, each with 2/J threads (the machine has 2 cores; --threads N
#   overrides, e.g. one job beside another call of this script). Runs go seed by seed, so an
#   interrupted call leaves every row with its first seeds.
# Cost on 2 CPU cores: 1.4 to 2 s of wall time per update and run at 2048 tokens with two jobs
#   (transformers' ProphetNet about twice that), plus about a minute per scored point; the whole
#   default table is about 6 hours, so it is meant to be run in several calls.
# Writes DIR/results.json, DIR/results.md, DIR/rouge_curves.png (collect_gigaword.py), copied
# to reproduction/prophetnet/ (results.json, results.md, figures/) unless --no-publish, and
# table 2 of docs/results/prophetnet.md between its markers.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"  # the collectors import reproduction.*
WORK="$ROOT/work/gigaword-comparison" THREADS="" SEEDS="1 2 3" UPDATES=1000 EVAL_AT="250 500 1000" TOK=2048 PT=150 JOBS=2
ONLY="transformer p1 p2 p2-g0.5 p3 ref-p1 ref-p2 p2-m1 p1-pt p2-pt p3-pt unilm" BATCHING=unsorted DATA=""
PUBLISH=(--publish "$HERE" --page "$ROOT/docs/results/prophetnet.md")
die() { echo "error: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) SEEDS="$2"; shift 2 ;; --updates) UPDATES="$2"; shift 2 ;; --eval-at) EVAL_AT="$2"; shift 2 ;;
    --max-tokens) TOK="$2"; shift 2 ;; --pretrain-updates) PT="$2"; shift 2 ;; --jobs) JOBS="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;; --work) WORK="$2"; shift 2 ;; --data) DATA="$2"; shift 2 ;; --no-publish) PUBLISH=(); shift ;;
    --threads) THREADS="$2"; shift 2 ;; --batching) BATCHING="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
for n in $UPDATES $TOK $PT $JOBS $SEEDS $EVAL_AT ${THREADS}; do [[ "$n" =~ ^[0-9]+$ ]] || die "expected a whole number, got '$n'"; done
[ "$JOBS" -ge 1 ] || die "--jobs must be >= 1"
case "$BATCHING" in unsorted|sorted) ;; *) die "--batching must be unsorted or sorted, got $BATCHING" ;; esac
for n in $EVAL_AT; do [ "$n" -ge 1 ] && [ "$n" -le "$UPDATES" ] || die "--eval-at points must lie within 1 .. --updates ($UPDATES)"; done
for name in $ONLY; do
  case "$name" in transformer|p1|p2|p2-g0.5|p3|ref-p1|ref-p2|p2-m1|p1-pt|p2-pt|p3-pt|unilm) ;; *) die "unknown run $name (see --help)" ;; esac
done
THREADS="${THREADS:-$(( 2 / JOBS > 0 ? 2 / JOBS : 1 ))}"
DATA_ARGS=()
[ -n "$DATA" ] && DATA_ARGS=(--data "$DATA")
PREP="$WORK/data"
KEPT="$HERE/runs/$BATCHING"
mkdir -p "$WORK/runs" "$KEPT"
START=$(date +%s)

# The data once, before the parallel runs share it.
[ -s "$PREP/bin/dict.article.txt" ] && [ -s "$PREP/bin-article/dict.article.txt" ] || {
  if [ ${#DATA_ARGS[@]} -gt 0 ]; then bash "$ROOT/data_prep/gigaword.sh" --local "$DATA" --out "$PREP"
  else bash "$ROOT/data_prep/gigaword.sh" --out "$PREP"; fi; }

# One line per run: its folder and the command that makes it.
JOBLIST="$WORK/jobs.txt"
: > "$JOBLIST"
first_seed="${SEEDS%% *}"
GIGA=(bash "$ROOT/examples/prophetnet/gigaword.sh" "${DATA_ARGS[@]}" --prep "$PREP" --max-tokens "$TOK" --finetune-updates "$UPDATES"
      --eval-at "$EVAL_AT" --patience 0 --batching "$BATCHING" --lenpen 1.0)
add() {  # add NAME POINTS CMD...: one line of JOBLIST, unless the kept results of NAME hold every point it scores
  if python "$HERE/collect_gigaword.py" --is-kept "$KEPT/$1" --eval-at "$2"; then echo "== kept  $1"; return; fi
  local out="$WORK/runs/$1"; shift 2; printf '%q ' "$out" "$@" >> "$JOBLIST"; echo >> "$JOBLIST"; }
for seed in $SEEDS; do
  for name in $ONLY; do
    case "$name" in p1-pt|p2-pt|p3-pt) [ "$seed" = "$first_seed" ] || continue ;; esac
    out="$WORK/runs/$name-s$seed"
    case "$name" in
      transformer) add "$name-s$seed" "$EVAL_AT" "${GIGA[@]}" --work "$out" --model transformer --seed "$seed" ;;
      p1|p2|p3) add "$name-s$seed" "$EVAL_AT" "${GIGA[@]}" --work "$out" --ngram "${name#p}" --pretrain-updates 0 \
                  --seed "$seed" ;;
      p2-m1) add "$name-s$seed" "$EVAL_AT" "${GIGA[@]}" --work "$out" --ngram 2 --batch-multiple 1 --pretrain-updates 0 \
               --seed "$seed" ;;
      p2-g0.5) add "$name-s$seed" "$EVAL_AT" "${GIGA[@]}" --work "$out" --ngram 2 --ngram-gamma 0.5 --pretrain-updates 0 \
                 --seed "$seed" ;;
      p[123]-pt) n="${name#p}"; add "$name-s$seed" "$EVAL_AT" "${GIGA[@]}" --work "$out" --ngram "${n%-pt}" \
                   --pretrain-updates "$PT" --seed "$seed" ;;
      ref-p1|ref-p2) add "$name-s$seed" "$EVAL_AT" python "$HERE/reference_transformers.py" "$PREP/bin" \
                   --refs "$PREP/raw/valid.title" \
                   --out "$out" --ngram "${name#ref-p}" --seed "$seed" --updates "$UPDATES" --eval-at $EVAL_AT \
                   --max-tokens "$TOK" --batching "$([ "$BATCHING" = unsorted ] && echo unsorted || echo fairseq)" ;;
      unilm) add "$name-s$seed" "$UPDATES" bash "$ROOT/examples/unilm/gigaword.sh" "${DATA_ARGS[@]}" --out "$out" \
               --arch unilm_transformer_tiny --layers 6 --dim 256 --ffn 1024 --heads 4 --updates "$UPDATES" --warmup 200 \
               --lr 7e-4 --max-tokens "$TOK" --no-repeat-ngram 3 --lenpen 1.0 --batching "$BATCHING" --patience 0 \
               --seed "$seed" ;;
    esac
  done
done

run_one() {  # run_one OUT CMD...: one run, its output in OUT/driver.log
  local out="$1"; shift
  mkdir -p "$out"
  echo "== start $(basename "$out")"
  if OMP_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS" "$@" >> "$out/driver.log" 2>&1; then
    python "$HERE/collect_gigaword.py" --keep "$out" --kept "$KEPT/$(basename "$out")"
    echo "== done  $(basename "$out")"
  else
    echo "== FAILED $(basename "$out") (see $out/driver.log)"; return 1
  fi
}
export -f run_one
export THREADS KEPT HERE PYTHONWARNINGS="${PYTHONWARNINGS:-ignore}"
status=0
xargs -r -P "$JOBS" -d '\n' -n 1 bash -c 'eval "run_one $1"' _ < "$JOBLIST" || status=1
python "$HERE/collect_gigaword.py" --work "$WORK" --runs "$KEPT" "${PUBLISH[@]}"
echo "$(( $(date +%s) - START )) s for this call"
exit "$status"

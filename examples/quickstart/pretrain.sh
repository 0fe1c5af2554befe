#!/usr/bin/env bash
# Trains the small HI-CMLM checkpoint that `make quickstart` starts from.
#   examples/quickstart/pretrain.sh [--multi30k DIR] [--work DIR] [--teacher-hours H]
#        [--teacher CKPT] [--student-updates N] [--student-arch ARCH] [--student-layers E D]
#        [--student-from-scratch] [--stage data|teacher|student|export]
# --multi30k DIR (or M30K=DIR): a local Multi30k (data_prep/multi30k.sh --local); without it
#   data_prep/multi30k.sh downloads it.
# 1. data:    Multi30k En->De, joint sentencepiece (6000 pieces), fairseq binary. With --teacher,
#             the sentencepiece model and dictionary of this folder's model/ (the teacher's).
# 2. teacher: an autoregressive fairseq `transformer` (3+3 layers x 192), distills the training
#             targets; --teacher CKPT distills with that checkpoint instead of training one.
# 3. student: `hi_cmlm_transformer_tiny` on the distilled targets, trained as the HI-CMLM paper
#             trains (section 3.3: a random half of the masked slots gets the copied source),
#             decoding with fence_replace; encoder initialised from the teacher; --student-updates.
#             --student-arch (default hi_cmlm_transformer_tiny), --student-layers E D (encoder
#             and decoder layers; default the architecture's, and 3 1 for the default
#             architecture: the shipped student's deep encoder under a shallow decoder, Kasai et
#             al. 2021, chosen on Multi30k val); --student-from-scratch: no
#             encoder from the teacher (needed for an encoder deeper than the teacher's 3 layers,
#             e.g. hi_cmlm_transformer_tiny_deep_shallow, Kasai et al. 2021).
# 4. export:  writes examples/quickstart/model/{checkpoint.pt,teacher.pt,spm.model,dict.txt}
#             (weights only, fp16, loadable by the safe loader; teacher.pt is the
#             autoregressive baseline that benchmarks/hicmlm.py decodes against).
# The shipped student's run (its command, updates, time and machine): docs/results/hi-cmlm.md.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
M30K="${M30K:-}"
WORK="$ROOT/work/quickstart-pretrain"
TEACHER_HOURS=0.75 STUDENT_UPDATES=4000 STAGE=all TEACHER="" STUDENT_ARCH=hi_cmlm_transformer_tiny
STUDENT_LAYERS=() FROM_SCRATCH=0
while [ $# -gt 0 ]; do
  case "$1" in
    --multi30k) M30K="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --teacher-hours) TEACHER_HOURS="$2"; shift 2 ;;
    --student-updates) STUDENT_UPDATES="$2"; shift 2 ;;
    --student-arch) STUDENT_ARCH="$2"; shift 2 ;;
    --student-layers) STUDENT_LAYERS=(--encoder-layers "$2" --decoder-layers "$3"); shift 3 ;;
    --student-from-scratch) FROM_SCRATCH=1; shift ;;
    --teacher) TEACHER="$2"; shift 2 ;;
    --stage) STAGE="$2"; shift 2 ;;
    *) echo "error: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
[ "$STUDENT_ARCH" = hi_cmlm_transformer_tiny ] && [ ${#STUDENT_LAYERS[@]} = 0 ] \
  && STUDENT_LAYERS=(--encoder-layers 3 --decoder-layers 1)
# an absolute teacher path, so that the export stage knows the shipped teacher however it is named
[ -z "$TEACHER" ] || TEACHER="$(realpath -m "$TEACHER")"
LOCAL_ARGS=()
[ -n "$M30K" ] && LOCAL_ARGS=(--local "$M30K")
run_stage() { [ "$STAGE" = all ] || [ "$STAGE" = "$1" ]; }

if run_stage data; then
  if [ -n "$TEACHER" ]; then
    SPM_MODEL="$HERE/model/spm.model" SRCDICT="$HERE/model/dict.txt" \
      bash "$ROOT/data_prep/multi30k.sh" "${LOCAL_ARGS[@]}" --out "$WORK/data" --vocab 6000
  else
    bash "$ROOT/data_prep/multi30k.sh" "${LOCAL_ARGS[@]}" --out "$WORK/data" --vocab 6000
  fi
fi
TEACHER_ARGS=(--hours "$TEACHER_HOURS")
[ -n "$TEACHER" ] && TEACHER_ARGS=(--teacher "$TEACHER")
if run_stage teacher; then
  bash "$ROOT/data_prep/distill.sh" --data "$WORK/data/bin" --out "$WORK/distill" "${TEACHER_ARGS[@]}"
fi
TEACHER="${TEACHER:-$WORK/distill/teacher/checkpoint_last.pt}"
if run_stage student; then
  INIT_ARGS=(--init-encoder-from "$TEACHER")
  [ "$FROM_SCRATCH" = 1 ] && INIT_ARGS=()
  fairseq-train "$WORK/distill/bin" --user-dir "$ROOT/fairseq_ext" \
    --task cmlm_hybrid -s en -t de --arch "$STUDENT_ARCH" "${STUDENT_LAYERS[@]}" --hybrid-strategy fence_replace \
    --train-decoder-input paper --train-copy-share 0.5 "${INIT_ARGS[@]}" \
    --criterion nat_loss --label-smoothing 0.1 --optimizer adam --adam-betas '(0.9,0.98)' \
    --lr 1e-3 --lr-scheduler inverse_sqrt --warmup-updates 1000 --clip-norm 1.0 --dropout 0.1 \
    --max-tokens 4096 --max-update "$STUDENT_UPDATES" --max-epoch 1000 \
    --save-dir "$WORK/student" --no-epoch-checkpoints --save-interval-updates 1000 \
    --keep-interval-updates 1 --log-format simple --log-interval 200 --seed 1 \
    2>&1 | tee -a "$WORK/student.log"
fi
if run_stage export; then
  mkdir -p "$HERE/model"
  python -m fairseq_ext.checkpoints export "$WORK/student/checkpoint_last.pt" "$HERE/model/checkpoint.pt" --fp16
  if [ "$TEACHER" != "$HERE/model/teacher.pt" ]; then
    python -m fairseq_ext.checkpoints export "$TEACHER" "$HERE/model/teacher.pt" --fp16
    cp "$WORK/data/spm.model" "$HERE/model/spm.model"
    cp "$WORK/data/bin/dict.en.txt" "$HERE/model/dict.txt"
  fi
fi

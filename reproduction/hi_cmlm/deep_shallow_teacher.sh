#!/usr/bin/env bash
# The deep-encoder, shallow-decoder autoregressive peer of the shipped student (Kasai et al. 2021,
# "Deep encoder, shallow decoder": an autoregressive model with the student's 3+1 layers x 192
# decodes about as fast as a non-autoregressive one). Trained as the shipped teacher was
# (data_prep/distill.sh's settings, Multi30k's 29,000 training pairs encoded with the shipped
# sentencepiece model and dictionary, seed 1), for the shipped teacher's 1775 updates (equal
# updates), with one decoder layer instead of three. The decoding bench
# (reproduction/benchmarks/frontier.py) decodes it with fairseq and CTranslate2.
#   reproduction/hi_cmlm/deep_shallow_teacher.sh --multi30k DIR [--work DIR] [--updates N]
# --multi30k DIR: a local Multi30k (train.{en,de}[.gz], val.{en,de}[.gz]).
# Resumable: run it again with the same --work and it continues from checkpoint_last.pt.
# Writes reproduction/hi_cmlm/models/teacher_3_1.pt (weights only, fp16, 10.8 MB; not in git: the
# bench skips this model, saying so, until this script has made it; 55 min on 2 CPU cores) and
# its log (models/teacher_3_1.log, in git: the run the published rows of docs/results/speed.md
# decoded).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
MODEL="$ROOT/examples/quickstart/model"
WORK="$ROOT/work/deep-shallow-teacher" M30K="" UPDATES=1775
while [ $# -gt 0 ]; do
  case "$1" in
    --multi30k) M30K="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --updates) UPDATES="$2"; shift 2 ;;
    *) echo "error: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
[ -n "$M30K" ] || { echo "error: --multi30k DIR is required (a local Multi30k)" >&2; exit 2; }
if [ ! -s "$WORK/data/bin/dict.en.txt" ]; then
  SPM_MODEL="$MODEL/spm.model" SRCDICT="$MODEL/dict.txt" \
    bash "$ROOT/data_prep/multi30k.sh" --local "$M30K" --out "$WORK/data" --vocab 6000
fi
mkdir -p "$WORK/teacher" "$ROOT/reproduction/hi_cmlm/models"
fairseq-train "$WORK/data/bin" --user-dir "$ROOT/fairseq_ext" --task translation -s en -t de \
  --arch transformer --encoder-layers 3 --decoder-layers 1 --encoder-embed-dim 192 \
  --decoder-embed-dim 192 --encoder-ffn-embed-dim 768 --decoder-ffn-embed-dim 768 \
  --encoder-attention-heads 4 --decoder-attention-heads 4 --share-all-embeddings --dropout 0.3 \
  --optimizer adam --adam-betas '(0.9,0.98)' --lr 1e-3 --lr-scheduler inverse_sqrt --warmup-updates 1000 \
  --clip-norm 1.0 --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --max-tokens 4096 \
  --max-update "$UPDATES" --max-epoch 200 --save-dir "$WORK/teacher" --no-epoch-checkpoints \
  --log-format simple --log-interval 100 --seed 1 2>&1 | tee -a "$WORK/teacher/train.log"
python -m fairseq_ext.checkpoints export "$WORK/teacher/checkpoint_last.pt" \
  "$ROOT/reproduction/hi_cmlm/models/teacher_3_1.pt" --fp16
grep -E '\| (epoch [0-9]+ \| )?(loss|valid)|done training' "$WORK/teacher/train.log" | tail -20 \
  > "$ROOT/reproduction/hi_cmlm/models/teacher_3_1.log"
echo "wrote reproduction/hi_cmlm/models/teacher_3_1.pt ($UPDATES updates)"

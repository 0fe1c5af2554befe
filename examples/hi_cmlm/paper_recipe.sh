#!/usr/bin/env bash
# HI-CMLM on WMT14 En-De or WMT16 En-Ro with the paper's hyper-parameters (section 4.1): 6+6 layers x 512,
# 8 heads, FFN 2048, Adam, lr 5e-4 after 20k warm-up updates, inverse-sqrt decay, 8k tokens per GPU
# on 4 GPUs (--update-freq 4 on one), 300k updates; mask-predict with 10 passes and length beam 5.
# One HI-CMLM model is trained as the paper trains every strategy (section 3.3: a random half of
# the masked target slots gets the copied source) and decoded with each of --strategies
# (WORK/hi_cmlm/decode-<strategy>/bleu.json).
#   examples/hi_cmlm/paper_recipe.sh --dataset wmt14_en_de|wmt16_en_ro [--strategies "all_mask all_copied weighted_sum fence_replace"]
#        [--distill] [--local DIR] [--work DIR] [--updates N] [--update-freq K]
#        [--arch A] [--dims "ARGS"] [--max-tokens N] [--warmup N] [--vocab N]
# --arch, --dims (fairseq-train size options), --max-tokens, --warmup and --vocab (sentencepiece
# pieces) default to the paper's (hi_cmlm_transformer_wmt_en_de, 8192, 20000, 32000); smaller
# values are for smoke runs (tests/test_user_scripts.py) and CPU trials.
# --distill trains an autoregressive teacher (data_prep/distill.sh) and uses its targets (as the
# paper does). Without a GPU this is days of compute: use reproduction/hi_cmlm/multi30k.sh on a CPU.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
DATASET="" WORK="" LOCAL_ARGS=() STRATEGIES="fence_replace all_mask all_copied weighted_sum"
DISTILL=0 UPDATES=300000 UPDATE_FREQ=4 ARCH=hi_cmlm_transformer_wmt_en_de DIMS="" MAX_TOKENS=8192 WARMUP=20000 VOCAB=32000
while [ $# -gt 0 ]; do
  case "$1" in
    --dataset) DATASET="$2"; shift 2 ;;
    --strategies) STRATEGIES="$2"; shift 2 ;;  --distill) DISTILL=1; shift ;;
    --local) LOCAL_ARGS=(--local "$2"); shift 2 ;;  --work) WORK="$2"; shift 2 ;;
    --updates) UPDATES="$2"; shift 2 ;;  --update-freq) UPDATE_FREQ="$2"; shift 2 ;;
    --arch) ARCH="$2"; shift 2 ;;  --dims) DIMS="$2"; shift 2 ;;  --max-tokens) MAX_TOKENS="$2"; shift 2 ;;
    --warmup) WARMUP="$2"; shift 2 ;;  --vocab) VOCAB="$2"; shift 2 ;;
    *) echo "error: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
case "$DATASET" in
  wmt14_en_de) TGT=de ;;
  wmt16_en_ro) TGT=ro ;;
  *) echo "error: --dataset must be wmt14_en_de or wmt16_en_ro" >&2; exit 2 ;;
esac
WORK="${WORK:-$ROOT/work/$DATASET}"
[ -s "$WORK/data/bin/dict.en.txt" ] || bash "$ROOT/data_prep/$DATASET.sh" "${LOCAL_ARGS[@]}" --out "$WORK/data" --vocab "$VOCAB"
DATA="$WORK/data/bin"
GEN=test
[ -e "$DATA/test.en-$TGT.en.bin" ] || GEN=valid
if [ "$DISTILL" = 1 ]; then
  bash "$ROOT/data_prep/distill.sh" --data "$DATA" --out "$WORK/distill" --src en --tgt "$TGT" --hours 48 \
    --teacher-args "--arch transformer_wmt_en_de --share-all-embeddings --dropout 0.1 --optimizer adam \
--adam-betas (0.9,0.98) --lr 7e-4 --lr-scheduler inverse_sqrt --warmup-updates 4000 --clip-norm 0.0 \
--criterion label_smoothed_cross_entropy --label-smoothing 0.1 --max-tokens 8192 --update-freq $UPDATE_FREQ"
  DATA="$WORK/distill/bin"
fi
bash "$HERE/run.sh" --data "$DATA" --work "$WORK/hi_cmlm" -s en -t "$TGT" --model hi_cmlm \
  --strategy fence_replace --train-input paper --decode "$STRATEGIES" \
  --arch "$ARCH" --dims "$DIMS" --updates "$UPDATES" --lr 5e-4 --warmup "$WARMUP" --max-tokens "$MAX_TOKENS" \
  --update-freq "$UPDATE_FREQ" --dropout 0.3 --gen-subset "$GEN" --iter 10 --length-beam 5

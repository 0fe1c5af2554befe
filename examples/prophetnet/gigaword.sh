#!/usr/bin/env bash
# ProphetNet on Gigaword headline generation (Qi et al. 2020, section 3): optional span-masking
# pre-training on the article side, fine-tuning on article -> title, beam search (the paper's
# beam 4, no repeated trigram, --lenpen), ROUGE-1/2/L F1 (fairseq_ext.analysis.rouge), with lead-8
# (the articles' first 8 words) beside it in WORK/rouge-N.json.
#
# The fine-tuning defaults are those of the "ProphetNet n = 2, span pre-training" row of
# docs/results/gigaword-10k.md (reproduction/gigaword_10k/driver.py): prophetnet_tiny, n = 2,
# batches of at most 2048 tokens cut in a random order, lr 7e-4 (chosen on valid over 2e-4),
# validation ROUGE-1 every 500 updates, early stopping after 3 validations without a better
# one, at most 20000 updates (the driver's cap), and the length penalty that scored best on
# valid1k over the row's runs stopped by early stopping. The one difference: that row's span
# pre-training ran 4000 updates on about 80,000 lines of English text (WikiText-2, the English
# sides of the WMT and Multi30k files, the training articles); by default this script
# pre-trains 200 updates on the training articles alone. --pretrain-text FILES
# --pretrain-updates 4000 pre-trains as the row did.
#
#   examples/prophetnet/gigaword.sh [options]
#     --work DIR              output folder (default work/prophetnet-gigaword); DIR/results.json
#     --data DIR              local Gigaword in the harvardnlp format (data_prep/gigaword.sh
#                             --local); without it data_prep/gigaword.sh downloads it
#     --prep DIR              binarized data (default DIR_OF_WORK/gigaword-data; reused when present,
#                             refused when this script made it with another --vocab)
#     --vocab N               sentencepiece vocabulary when --prep is made (default 10000)
#     --model prophetnet|transformer   transformer: fairseq's plain Transformer with the same
#                             sizes and embedding choices (learned positions, embedding layer
#                             norm, GELU, shared embeddings), label-smoothed cross-entropy
#     --arch NAME             prophetnet_tiny (default), prophetnet_base, prophetnet_large
#     --ngram N               predicting streams (default 2)
#     --ngram-gamma X         stream weights alpha_j proportional to X^j (default 1.0, equal weights;
#                             the paper's attenuation, e.g. 0.5, weighs the next-token stream more)
#     --seed N                seed of initialisation, batches and dropout (default 1)
#     --batching unsorted|sorted  fine-tuning batches cut from the pairs in a random order
#                             (default; translation_prophetnet --unsorted-batches) or in fairseq's
#                             order by length
#     --batch-multiple N      fine-tuning batches hold a multiple of N pairs (fairseq-train
#                             --required-batch-size-multiple; default fairseq's 8, which rounds a
#                             batch down to 8, 16, 24, ... pairs below --max-tokens)
#     --patience N            N >= 1 (default 3): validate every --validate-every updates (default
#                             500) with fairseq-train --eval-rouge (the decoding of step 4), stop when
#                             validation ROUGE-1 has not improved for N validations (fairseq's
#                             --patience; --finetune-updates stays the cap) and decode and score
#                             checkpoint_best.pt (WORK/points/best.json). 0: fine-tune
#                             --finetune-updates updates and score the --eval-at points
#     --eval-at "N1 N2 ..."   fine-tuning updates to decode and score at (implies --patience 0;
#                             default: the last one); each point's checkpoint is decoded, scored
#                             and then deleted, and a rerun resumes (finished points are kept,
#                             training continues from checkpoint_last.pt, so a larger
#                             --finetune-updates extends a run)
#     --pretrain-updates N    span-masking pre-training updates on the articles (default 200, about
#                             2 epochs of the 10k shared articles; 0: none; default 0 with
#                             --model transformer or --init)
#     --pretrain-text "F1 F2 ..."  English text files (.gz too, one paragraph a line) pre-trained on
#                             beside the training articles: put in Gigaword's style with them
#                             (python data_prep/text.py gigaword-style --wikitext: lowercased, digits
#                             as '#', lines of 3 to 100 words, WikiText's headings dropped), encoded
#                             with the data's sentencepiece, binarized with its dictionary into
#                             WORK/pretrain-data; the validation articles stay its validation set
#     --finetune-updates N    fine-tuning updates: the cap under --patience (default 20000, about
#                             97 epochs of the 10k pairs), the number trained with --patience 0
#     --lenpen X              fairseq-generate's length penalty of step 4 (default 1.5; the
#                             validations of --patience decode with 1.0, as the row's did). A rerun
#                             with another X decodes checkpoint_best.pt again; the --eval-at points,
#                             whose checkpoints are deleted once scored, are refused in one line
#     --max-tokens N          tokens per batch (default 2048)
#     --lr X                  peak learning rate (default 7e-4; inverse square root after 200 warm-up updates)
#     --paper                 the paper's fine-tuning recipe (ProphetNet's README): prophetnet_large,
#                             lr 1e-5, warm-up 1000 from 1e-7, clip-norm 0.1, weight decay 0.01,
#                             dropout 0.1, max-tokens 1400, 512 positions. Meant for a GPU and a
#                             pre-trained checkpoint (--init CKPT).
#     --init CKPT             fine-tune from this checkpoint instead of pre-training here
#
# Defaults: prophetnet_tiny, 200 pre-training updates, then fine-tuning with early stopping (at
# most 20000 updates) on the 10k training pairs (train10k), ROUGE on the 1000 validation pairs
# (valid1k; the test split is withheld). WORK/results.json and the last line printed name the
# checkpoint scored and its update. A rerun in the same --work with other settings than
# --finetune-updates, --eval-at and --lenpen is refused in one line.
# Wall time: about 1.4 seconds of one CPU core per fine-tuning update at 2048 tokens and 30 s a
# validation (docs/results/gigaword-10k.md); the row's seed 1 stopped by early stopping at 7000
# updates, about 3 hours.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
source "$ROOT/examples/progress.sh"
source "$ROOT/examples/early_stopping.sh"
source "$ROOT/examples/same_settings.sh"
export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore}"
die() { echo "error: $*" >&2; exit 2; }

WORK="$ROOT/work/prophetnet-gigaword" DATA="" PREP="" MODEL=prophetnet ARCH=prophetnet_tiny NGRAM=2
PRETRAIN="" FINETUNE=20000 MAX_TOKENS=2048 LR=7e-4 PAPER=0 INIT="" VOCAB=10000 SEED=1 GAMMA=1.0 EVAL_AT="" MULTIPLE=()
PATIENCE=3 PATIENCE_GIVEN=0 VALIDATE_EVERY=500 LENPEN=1.5 BATCHING=unsorted PRETRAIN_TEXT=()
while [ $# -gt 0 ]; do
  case "$1" in
    --work) WORK="$2"; shift 2 ;;
    --data) DATA="$2"; shift 2 ;;
    --prep) PREP="$2"; shift 2 ;;
    --vocab) VOCAB="$2"; shift 2 ;;
    --model) MODEL="$2"; shift 2 ;;
    --arch) ARCH="$2"; shift 2 ;;
    --ngram) NGRAM="$2"; shift 2 ;;
    --ngram-gamma) GAMMA="$2"; shift 2 ;;
    --seed) SEED="$2"; shift 2 ;;
    --batching) BATCHING="$2"; shift 2 ;;
    --batch-multiple) MULTIPLE=(--required-batch-size-multiple "$2"); shift 2 ;;
    --eval-at) EVAL_AT="$2"; shift 2 ;;
    --patience) PATIENCE="$2" PATIENCE_GIVEN=1; shift 2 ;;
    --lenpen) LENPEN="$2"; shift 2 ;;
    --validate-every) VALIDATE_EVERY="$2"; shift 2 ;;
    --pretrain-updates) PRETRAIN="$2"; shift 2 ;;
    --pretrain-text) read -r -a PRETRAIN_TEXT <<< "$2"; shift 2 ;;
    --finetune-updates) FINETUNE="$2"; shift 2 ;;
    --max-tokens) MAX_TOKENS="$2"; shift 2 ;;
    --lr) LR="$2"; shift 2 ;;
    --paper) PAPER=1; shift ;;
    --init) INIT="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
case "$MODEL" in prophetnet|transformer) ;; *) die "--model must be prophetnet or transformer, got $MODEL" ;; esac
case "$BATCHING" in unsorted) UNSORTED=(--unsorted-batches) ;; sorted) UNSORTED=() ;;
  *) die "--batching must be unsorted or sorted, got $BATCHING" ;; esac
# default: early stopping, unless --eval-at names the points to score
[ "$PATIENCE_GIVEN" = 1 ] || [ -z "$EVAL_AT" ] || PATIENCE=0
require_lenpen "$LENPEN"
if [ -z "$PRETRAIN" ]; then  # default: 200, none for the transformer or a given starting checkpoint
  PRETRAIN=200
  if [ "$MODEL" = transformer ] || [ -n "$INIT" ]; then PRETRAIN=0; fi
fi
[[ "$PRETRAIN" =~ ^[0-9]+$ && "$FINETUNE" =~ ^[1-9][0-9]*$ ]] || die "--pretrain-updates must be >= 0 and --finetune-updates >= 1"
[ "$MODEL" = transformer ] && [ "$PRETRAIN" -gt 0 ] && die "span-masking pre-training is for --model prophetnet; use --pretrain-updates 0 with the transformer"
[ -n "$INIT" ] && [ "$PRETRAIN" -gt 0 ] && die "--init and --pretrain-updates both give the starting point; choose one"
[ ${#PRETRAIN_TEXT[@]} -gt 0 ] && [ "$PRETRAIN" = 0 ] && die "--pretrain-text is pre-trained on with --pretrain-updates N >= 1 (--model prophetnet, no --init)"
for f in "${PRETRAIN_TEXT[@]}"; do [ -r "$f" ] && [ -f "$f" ] || die "--pretrain-text: cannot read $f"; done
[ -z "$INIT" ] || [ -s "$INIT" ] || die "--init $INIT does not exist"
[[ "$SEED" =~ ^[0-9]+$ ]] || die "--seed must be an integer >= 0, got $SEED"
rouge_early_stopping "$PATIENCE" "$VALIDATE_EVERY" 4 3  # sets STOPPING and SCORED
[ "$PATIENCE" -gt 0 ] && [ -n "$EVAL_AT" ] && die "--eval-at and --patience both choose the checkpoints to score; give one"
[ "$PATIENCE" -gt 0 ] && [ "$VALIDATE_EVERY" -gt "$FINETUNE" ] \
  && die "--validate-every $VALIDATE_EVERY is more than --finetune-updates $FINETUNE: no validation would choose the checkpoint; give --validate-every at most $FINETUNE or --patience 0"
EVAL_AT="${EVAL_AT:-$FINETUNE}"
for n in $EVAL_AT; do
  [[ "$n" =~ ^[1-9][0-9]*$ && "$n" -le "$FINETUNE" ]] || die "--eval-at takes update counts within 1 .. --finetune-updates ($FINETUNE), got $n"
done
# Checkpoints and validation every G updates, G = the greatest common divisor of the points;
# with --patience every --validate-every updates, and the one point scored is checkpoint_best.pt.
EVERY=$(python -c "import math, sys; print(math.gcd(*map(int, sys.argv[1:])))" $EVAL_AT)
POINTS="$EVAL_AT" INTERVALS=(--save-interval-updates "$EVERY" --validate-interval-updates "$EVERY")
[ "$PATIENCE" -gt 0 ] && POINTS=best INTERVALS=("${STOPPING[@]}")

POSITIONS=1024 OPTIM=(--optimizer adam --adam-betas '(0.9,0.98)' --clip-norm 1.0 --lr-scheduler inverse_sqrt
  --warmup-updates 200 --dropout 0.1 --attention-dropout 0.1)
if [ "$PAPER" = 1 ]; then
  ARCH=prophetnet_large LR=1e-5 MAX_TOKENS=1400 POSITIONS=512
  OPTIM=(--optimizer adam --adam-betas '(0.9,0.999)' --clip-norm 0.1 --lr-scheduler inverse_sqrt
    --warmup-init-lr 1e-07 --warmup-updates 1000 --weight-decay 0.01 --dropout 0.1 --attention-dropout 0.1)
fi
mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"
PREP="${PREP:-$(dirname "$WORK")/gigaword-data}"
# what WORK's checkpoints and points were trained with (--finetune-updates and --eval-at may grow: a run extends)
same_settings "$WORK" "a run" "--prep $PREP --model $MODEL --arch $ARCH --ngram $NGRAM --ngram-gamma $GAMMA \
--seed $SEED ${UNSORTED[*]} ${MULTIPLE[*]} --patience $PATIENCE --validate-every $VALIDATE_EVERY \
--pretrain-updates $PRETRAIN --pretrain-text '${PRETRAIN_TEXT[*]}' --max-tokens $MAX_TOKENS --lr $LR --paper $PAPER --init '$INIT'"
# the length penalty a scored point was decoded with (a point written before --lenpen existed: 1.0)
point_lenpen() { python -c "import json, sys; print(float(json.load(open(sys.argv[1])).get('lenpen', 1.0)))" "$1"; }
LENPEN=$(python -c "import sys; print(float(sys.argv[1]))" "$LENPEN")
for n in $POINTS; do  # checkpoint_best.pt is decoded again with another --lenpen; an --eval-at point's checkpoint is gone
  if [ "$n" != best ] && [ -s "$WORK/points/$n.json" ] && [ "$(point_lenpen "$WORK/points/$n.json")" != "$LENPEN" ]; then
    die "$WORK/points/$n.json was decoded with --lenpen $(point_lenpen "$WORK/points/$n.json") and its checkpoint" \
      "deleted once scored; give that --lenpen or another --work"
  fi
done
COMMANDS="$WORK/commands.txt"  # appended to by every call (a rerun resumes)
echo "# $(date -u +%FT%TZ)" >> "$COMMANDS"
logged() { printf '%q ' "$@" >> "$COMMANDS"; echo >> "$COMMANDS"; "$@"; }
T0=$(date +%s)

echo "== 1/4 data: $PREP"
if [ -s "$PREP/bin/dict.article.txt" ] && [ -s "$PREP/bin-article/dict.article.txt" ]; then
  [ ! -s "$PREP/settings" ] || same_settings "$PREP" "binarized data" "--vocab $VOCAB" --prep  # made here: the same vocabulary
else
  same_settings "$PREP" "binarized data" "--vocab $VOCAB" --prep
  if [ -n "$DATA" ]; then logged bash "$ROOT/data_prep/gigaword.sh" --local "$DATA" --out "$PREP" --vocab "$VOCAB"
  else logged bash "$ROOT/data_prep/gigaword.sh" --out "$PREP" --vocab "$VOCAB"; fi
fi
T1=$(date +%s)

# The same sizes for the plain Transformer, read from the ProphetNet architecture.
SIZES=($(python - "$ARCH" <<'EOF'
import argparse, sys
from fairseq_ext import plugin
from fairseq.models import ARCH_CONFIG_REGISTRY
plugin.load()
a = argparse.Namespace()
ARCH_CONFIG_REGISTRY[sys.argv[1]](a)
for side in ("encoder", "decoder"):
    for f in ("layers", "embed_dim", "ffn_embed_dim", "attention_heads"):
        print(f"--{side}-{f.replace('_', '-')} {getattr(a, f'{side}_{f}')}")
EOF
))
if [ "$MODEL" = prophetnet ]; then
  MODEL_ARGS=(--arch "$ARCH" --ngram "$NGRAM" --criterion ngram_language_loss --ngram-gamma "$GAMMA")
else
  MODEL_ARGS=(--arch transformer "${SIZES[@]}" --activation-fn gelu --encoder-learned-pos --decoder-learned-pos
    --layernorm-embedding --no-scale-embedding --share-all-embeddings --activation-dropout 0.1
    --criterion label_smoothed_cross_entropy --report-accuracy)
fi
TRAIN_ARGS=(--user-dir "$ROOT/fairseq_ext" "${MODEL_ARGS[@]}" "${OPTIM[@]}" --lr "$LR" --max-tokens "$MAX_TOKENS"
  --max-source-positions "$POSITIONS" --max-target-positions "$POSITIONS" --no-epoch-checkpoints
  --log-format simple --log-interval 50 --seed "$SEED" --num-workers 0)

START=()
if [ "$PRETRAIN" -gt 0 ]; then
  PRETRAIN_BIN="$PREP/bin-article" CORPUS="the articles"
  if [ ${#PRETRAIN_TEXT[@]} -gt 0 ]; then  # the text files and the articles, in Gigaword's style
    PRETRAIN_BIN="$WORK/pretrain-data/bin" CORPUS="the articles and ${PRETRAIN_TEXT[*]}"
    if [ ! -s "$PRETRAIN_BIN/dict.article.txt" ]; then
      mkdir -p "$WORK/pretrain-data"
      logged python "$ROOT/data_prep/text.py" gigaword-style --wikitext "${PRETRAIN_TEXT[@]}" "$PREP/raw/train.article" \
        > "$WORK/pretrain-data/train.txt"
      logged python "$ROOT/data_prep/spm.py" encode --model "$PREP/spm.model" < "$WORK/pretrain-data/train.txt" \
        > "$WORK/pretrain-data/train.article"
      logged fairseq-preprocess --only-source --source-lang article --trainpref "$WORK/pretrain-data/train" \
        --validpref "$PREP/spm/valid" --srcdict "$PREP/bin/dict.article.txt" --destdir "$PRETRAIN_BIN" --workers 2 \
        > "$WORK/pretrain-data/preprocess.log" 2>&1 || { tail -20 "$WORK/pretrain-data/preprocess.log"; exit 1; }
    fi
    echo "pre-training corpus: $(wc -l < "$WORK/pretrain-data/train.txt") lines in Gigaword's style ($WORK/pretrain-data)"
  fi
  echo "== 2/4 span-masking pre-training on $CORPUS: $PRETRAIN updates"
  [ -s "$WORK/finetune/checkpoint_last.pt" ] || logged fairseq-train "$PRETRAIN_BIN" --task prophetnet_denoising "${TRAIN_ARGS[@]}" \
    --max-update "$PRETRAIN" --validate-interval 1000 --save-dir "$WORK/pretrain" \
    2>&1 | fairseq_progress "$WORK/pretrain.log" || { tail -20 "$WORK/pretrain.log"; exit 1; }
  grep -E "\| valid on" "$WORK/pretrain.log" | tail -1 | cut -c1-200 || true
  START=(--finetune-from-model "$WORK/pretrain/checkpoint_last.pt")
elif [ -n "$INIT" ]; then
  START=(--finetune-from-model "$INIT")
else
  echo "== 2/4 no pre-training"
fi
T2=$(date +%s)

if [ "$PATIENCE" -gt 0 ]; then
  echo "== 3/4 fine-tuning article -> title: at most $FINETUNE updates, early stopping on validation ROUGE-1 (--patience $PATIENCE, validated every $VALIDATE_EVERY updates)"
else
  echo "== 3/4 fine-tuning article -> title: $FINETUNE updates (points: $EVAL_AT)"
fi
mkdir -p "$WORK/points"
todo=0
for n in $POINTS; do [ -s "$WORK/points/$n.json" ] || todo=1; done
if [ "$todo" = 1 ]; then
  logged fairseq-train "$PREP/bin" --task translation_prophetnet -s article -t title "${TRAIN_ARGS[@]}" \
    --label-smoothing 0.1 --max-update "$FINETUNE" "${START[@]}" "${UNSORTED[@]}" "${MULTIPLE[@]}" "${INTERVALS[@]}" \
    --save-dir "$WORK/finetune" 2>&1 | fairseq_progress -a "$WORK/finetune.log" \
    || { tail -20 "$WORK/finetune.log"; exit 1; }
  grep -E "\| valid on" "$WORK/finetune.log" | tail -1 | cut -c1-200 || true
fi
T3=$(date +%s)

echo "== 4/4 beam search (beam 4, lenpen $LENPEN) on the validation pairs and ROUGE at each point"
REF="$PREP/raw/valid.title"
cp "$REF" "$WORK/ref.title"
for n in $POINTS; do
  [ -s "$WORK/points/$n.json" ] && [ "$(point_lenpen "$WORK/points/$n.json")" = "$LENPEN" ] && continue
  if [ "$n" = best ]; then
    ckpt="$WORK/finetune/$SCORED" updates_of=$(checkpoint_update "$WORK/finetune/$SCORED" "$WORK/finetune/checkpoint_last.pt")
    read -r update last <<< "$updates_of"
    echo "$SCORED: update $update of the $last trained"
  else
    ckpt=$(ls "$WORK"/finetune/checkpoint_*_"$n".pt 2>/dev/null | head -1) update="$n"
    [ -n "$ckpt" ] || die "no checkpoint of update $n in $WORK/finetune (was the run trained past $n without --eval-at $n?)"
  fi
  t0=$(date +%s)
  logged fairseq-generate "$PREP/bin" --user-dir "$ROOT/fairseq_ext" --task translation_prophetnet -s article \
    -t title --path "$ckpt" --gen-subset valid --batch-size 64 --beam 4 \
    --lenpen "$LENPEN" --no-repeat-ngram-size 3 --max-len-a 0 --max-len-b 40 --post-process sentencepiece \
    --max-source-positions "$POSITIONS" --max-target-positions "$POSITIONS" --log-format simple --log-interval 4 \
    2>&1 > "$WORK/generate-$n.txt" | fairseq_progress "$WORK/generate-$n.log" || { tail -20 "$WORK/generate-$n.log"; exit 1; }
  grep '^D-' "$WORK/generate-$n.txt" | sed 's/^D-//' | sort -n -k1,1 | cut -f3 > "$WORK/hyp-$n.title"
  [ "$(wc -l < "$WORK/hyp-$n.title")" = "$(wc -l < "$REF")" ] || die "not every validation article was decoded at update $update"
  logged python -m fairseq_ext.analysis.rouge --hyp "$WORK/hyp-$n.title" --ref "$WORK/ref.title" \
    --source "$PREP/raw/valid.article" --json "$WORK/rouge-$n.json"
  python "$HERE/gigaword_point.py" --work "$WORK" --update "$update" --lenpen "$LENPEN" --name "$n" \
    --checkpoint "$(basename "$ckpt")" --decode-seconds $(( $(date +%s) - t0 ))
  [ "$n" = best ] || rm -f "$ckpt"
done
T4=$(date +%s)
STOPPED=()  # with --patience: the scores are checkpoint_best.pt's, training stopped at checkpoint_last.pt
[ "$PATIENCE" -gt 0 ] && STOPPED=(--patience "$PATIENCE" --validate-every "$VALIDATE_EVERY"
  --trained-updates "$(checkpoint_update "$WORK/finetune/checkpoint_last.pt")")

python "$HERE/gigaword_point.py" --work "$WORK" --summary --model "$MODEL" --arch "$ARCH" --ngram "$NGRAM" \
  --ngram-gamma "$GAMMA" --seed "$SEED" --pretrain-updates "$PRETRAIN" --finetune-updates "$FINETUNE" \
  --paper "$PAPER" "${STOPPED[@]}" --times "$T0" "$T1" "$T2" "$T3" "$T4"

#!/usr/bin/env bash
# UniLM headline generation on Gigaword (Su 2019's title-generation experiment): one
# unilm_transformer stack with the prefix mask, trained on article -> title pairs, decoded
# with beam search (cached keys/values), scored with the project's ROUGE
# (fairseq_ext/analysis/rouge.py: rouge-score, ROUGE-1/2/L F1, stemmed) against the
# normalised validation titles of data_prep/gigaword.sh, the same scorer and references as
# the ProphetNet example, so both go in one table; lead-8 (the articles' first 8 words, the
# baseline a headline model must beat) is scored beside it, in OUT/rouge.json.
#
# The defaults are the settings of the "UniLM at random" row of docs/results/gigaword-10k.md
# (reproduction/gigaword_10k/driver.py): unilm_transformer_small (all-MiniLM-L6-v2's sizes, 6 x
# 384), batches of at most 1024 tokens cut in a random order, Adam (0.9, 0.98), lr 5e-4 after 100
# warm-up updates, inverse square root, label smoothing 0.1, clip norm 1.0; validation ROUGE-1
# every 500 updates, early stopping after 3 validations without a better one, at most 20000
# updates; beam 4, length penalty 0.6 (the best valid ROUGE-1 averaged over the row's seeds that
# stopped by early stopping), no repeated trigram, at most 40 tokens. The one difference: that row reads
# MiniLM's WordPiece vocabulary, this script data_prep/gigaword.sh's sentencepiece (--vocab).
#
#   examples/unilm/gigaword.sh [--data DIR] [--out DIR] [--arch NAME] [--layers N] [--dim N]
#       [--ffn N] [--heads N] [--mask prefix|causal] [--updates N] [--max-tokens N] [--lr LR]
#       [--warmup N] [--beam N] [--no-repeat-ngram N] [--vocab N] [--train-lines N] [--valid-lines N]
#       [--batching sorted|unsorted] [--seed N] [--init-from CKPT --init-dict DICT --init-spm MODEL]
#       [--patience N] [--validate-every N] [--lenpen X]
#
# --data DIR: a local Gigaword in the harvardnlp layout, PREFIX.{article,title}.txt with
#   PREFIX train10k and valid1k (a sample) or train and valid.filter (the full release);
#   without it data_prep/gigaword.sh downloads the release into OUT/download;
#   --train-lines / --valid-lines take the first N pairs.
# --layers/--dim/--ffn/--heads override the sizes of --arch (default unilm_transformer_small;
#   unilm_transformer_tiny, 2 x 128, for smoke runs); give a ProphetNet-sized run the same
#   numbers as that example.
# --batching: unsorted (default) cuts batches from the pairs in a random order (unilm_seq2seq
#   --unsorted-batches), as the tables' rows are; sorted trains on fairseq's length-sorted batches.
# --seed: fairseq-train's --seed (default 1): initialisation, batch order and dropout.
# --init-from: a fairseq roberta checkpoint; the data are then encoded with its sentencepiece
#   model (--init-spm) and binarized with its dictionary (--init-dict).
# --patience N: 0 trains --updates updates and scores checkpoint_last.pt; N >= 1 (default 3)
#   validates every --validate-every updates (default 500, at most --updates) with fairseq-train
#   --eval-rouge (the decoding of step 3), stops when validation ROUGE-1 has not improved for N
#   validations (fairseq's --patience; --updates stays the cap) and decodes and scores
#   checkpoint_best.pt.
# --lenpen X: fairseq-generate's length penalty of step 3 (default 0.6; validation
#   during training always decodes with 1.0).
# Writes OUT/results.json (ROUGE-1/2/L F1, the checkpoint scored and its update, commands, wall
# time, hardware) and OUT/hyp.txt. Cost: about 5 hours of one CPU core for the defaults: the row's
# first converged seed stopped early at 10000 updates, 1.6 s an update with WordPiece and 84 s a
# validation (docs/results/gigaword-10k.md).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
source "$ROOT/examples/progress.sh"
source "$ROOT/examples/early_stopping.sh"
DATA="" OUT="$ROOT/work/unilm-gigaword" ARCH="unilm_transformer_small"
LAYERS="" DIM="" FFN="" HEADS="" MASK="prefix" UPDATES=20000 MAX_TOKENS=1024 LR=5e-4 WARMUP=100
BEAM=4 NO_REPEAT=3 VOCAB=10000 TRAIN_LINES=0 VALID_LINES=0 INIT_FROM="" INIT_DICT="" INIT_SPM="" BATCHING=unsorted SEED=1
PATIENCE=3 EVERY=500 LENPEN=0.6
die() { echo "error: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || die "option $1 needs a value"
  case "$1" in
    --data) DATA="$2" ;; --out) OUT="$2" ;; --arch) ARCH="$2" ;; --layers) LAYERS="$2" ;;
    --dim) DIM="$2" ;; --ffn) FFN="$2" ;; --heads) HEADS="$2" ;; --mask) MASK="$2" ;;
    --updates) UPDATES="$2" ;; --max-tokens) MAX_TOKENS="$2" ;; --lr) LR="$2" ;; --warmup) WARMUP="$2" ;;
    --beam) BEAM="$2" ;; --no-repeat-ngram) NO_REPEAT="$2" ;; --vocab) VOCAB="$2" ;; --train-lines) TRAIN_LINES="$2" ;;
    --valid-lines) VALID_LINES="$2" ;; --init-from) INIT_FROM="$2" ;; --init-dict) INIT_DICT="$2" ;;
    --init-spm) INIT_SPM="$2" ;; --batching) BATCHING="$2" ;; --seed) SEED="$2" ;;
    --patience) PATIENCE="$2" ;; --validate-every) EVERY="$2" ;; --lenpen) LENPEN="$2" ;;
    *) die "unknown option $1 (see the header of $0)" ;;
  esac
  shift 2
done
[[ "$SEED" =~ ^[0-9]+$ ]] || die "--seed must be a whole number, got '$SEED'"
[[ "$UPDATES" =~ ^[1-9][0-9]*$ ]] || die "--updates must be a whole number >= 1, got '$UPDATES'"
require_lenpen "$LENPEN"
[[ "$PATIENCE" =~ ^[1-9] && "$EVERY" =~ ^[0-9]+$ ]] && [ "$EVERY" -gt "$UPDATES" ] \
  && die "--validate-every $EVERY is more than --updates $UPDATES: no validation would choose the checkpoint; give --validate-every at most $UPDATES or --patience 0"
rouge_early_stopping "$PATIENCE" "$EVERY" "$BEAM" "$NO_REPEAT"  # sets STOPPING and SCORED
case "$BATCHING" in unsorted) UNSORTED=(--unsorted-batches) ;; sorted) UNSORTED=() ;;
  *) die "--batching must be sorted or unsorted, got $BATCHING" ;; esac
[ -z "$DATA" ] || [ -d "$DATA" ] || die "no data folder $DATA (pass --data DIR with PREFIX.article.txt / PREFIX.title.txt)"
if [ -n "$INIT_FROM" ]; then
  [ -s "$INIT_FROM" ] && [ -s "$INIT_DICT" ] && [ -s "$INIT_SPM" ] \
    || die "--init-from needs the checkpoint, --init-dict (its dict.txt) and --init-spm (its sentencepiece model)"
fi
mkdir -p "$OUT"
export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore}"
START=$(date +%s)
COMMANDS="$OUT/commands.txt"; : > "$COMMANDS"
log_run() { printf '%q ' "$@" >> "$COMMANDS"; echo >> "$COMMANDS"; "$@"; }

echo "== 1/4 data: data_prep/gigaword.sh"
SRC="$OUT/source"; mkdir -p "$SRC"
train=train10k valid=valid1k suffix=.txt
if [ -z "$DATA" ]; then  # the release, downloaded and cleaned: raw/{train,valid}.{article,title}
  [ -s "$OUT/download/raw/valid.title" ] || bash "$ROOT/data_prep/gigaword.sh" --out "$OUT/download" --raw-only
  DATA="$OUT/download/raw" train=train valid=valid suffix=""
elif [ ! -s "$DATA/train10k.article.txt" ]; then
  train=train valid=valid.filter
fi
for side in article title; do
  for pair in "train:$train:$TRAIN_LINES" "valid:$valid:$VALID_LINES"; do
    IFS=: read -r name prefix lines <<< "$pair"
    [ -s "$DATA/$prefix.$side$suffix" ] || die "$DATA has no $prefix.$side$suffix"
    if [ "$lines" -gt 0 ]; then head -n "$lines" "$DATA/$prefix.$side$suffix"; else cat "$DATA/$prefix.$side$suffix"; fi \
      > "$SRC/$name.$side.txt"
  done
done
PREP=(bash "$ROOT/data_prep/gigaword.sh" --local "$SRC" --out "$OUT/data" --vocab "$VOCAB" --train train --valid valid)
if [ -n "$INIT_FROM" ]; then
  mkdir -p "$OUT/data"; cp "$INIT_SPM" "$OUT/data/spm.model"
  SRCDICT="$INIT_DICT" log_run "${PREP[@]}" > "$OUT/prep.log" 2>&1 || { tail -5 "$OUT/prep.log"; exit 1; }
else
  log_run "${PREP[@]}" > "$OUT/prep.log" 2>&1 || { tail -5 "$OUT/prep.log"; exit 1; }
fi
tail -1 "$OUT/prep.log"

STOP=""
[ "$PATIENCE" -gt 0 ] && STOP=" at most, early stopping on validation ROUGE-1 (--patience $PATIENCE, validated every $EVERY updates)"
echo "== 2/4 fairseq-train: $ARCH, --attention-mask $MASK, $UPDATES updates$STOP"
SIZES=()
[ -n "$LAYERS" ] && SIZES+=(--encoder-layers "$LAYERS")
[ -n "$DIM" ] && SIZES+=(--encoder-embed-dim "$DIM")
[ -n "$FFN" ] && SIZES+=(--encoder-ffn-embed-dim "$FFN")
[ -n "$HEADS" ] && SIZES+=(--encoder-attention-heads "$HEADS")
INIT=()
[ -n "$INIT_FROM" ] && INIT=(--init-from "$INIT_FROM")
rm -rf "$OUT/checkpoints"
TRAIN_START=$(date +%s)
log_run fairseq-train "$OUT/data/bin" --user-dir "$ROOT/fairseq_ext" --task unilm_seq2seq -s article -t title \
  --arch "$ARCH" "${SIZES[@]}" --attention-mask "$MASK" "${INIT[@]}" "${UNSORTED[@]}" "${STOPPING[@]}" \
  --criterion label_smoothed_cross_entropy --label-smoothing 0.1 \
  --optimizer adam --adam-betas '(0.9,0.98)' --lr "$LR" --lr-scheduler inverse_sqrt \
  --warmup-updates "$WARMUP" --clip-norm 1.0 --max-tokens "$MAX_TOKENS" --max-update "$UPDATES" \
  --save-dir "$OUT/checkpoints" --no-epoch-checkpoints --log-format simple --log-interval 50 \
  --seed "$SEED" 2>&1 | fairseq_progress "$OUT/train.log" || { tail -20 "$OUT/train.log"; exit 1; }
TRAIN_SECONDS=$(( $(date +%s) - TRAIN_START ))
grep -E "\| (train|valid) \|" "$OUT/train.log" | tail -2 | cut -c1-160
UPDATES_OF=$(checkpoint_update "$OUT/checkpoints/$SCORED" "$OUT/checkpoints/checkpoint_last.pt")  # the update of the checkpoint scored, and the last
read -r SCORED_UPDATE LAST_UPDATE <<< "$UPDATES_OF"

echo "== 3/4 fairseq-generate of $SCORED (update $SCORED_UPDATE of $LAST_UPDATE): beam $BEAM, length penalty $LENPEN on the validation split"
GEN_START=$(date +%s)
log_run fairseq-generate "$OUT/data/bin" --user-dir "$ROOT/fairseq_ext" --task unilm_seq2seq -s article -t title \
  --path "$OUT/checkpoints/$SCORED" --gen-subset valid --beam "$BEAM" --lenpen "$LENPEN" \
  --no-repeat-ngram-size "$NO_REPEAT" --max-len-a 0 --max-len-b 40 \
  --batch-size 64 --post-process sentencepiece --log-format simple --log-interval 4 \
  2>&1 > "$OUT/generate.txt" | fairseq_progress "$OUT/generate.log" \
  || { tail -20 "$OUT/generate.log"; exit 1; }
GEN_SECONDS=$(( $(date +%s) - GEN_START ))
grep '^D-' "$OUT/generate.txt" | sed 's/^D-//' | sort -n -k1,1 | cut -f3 > "$OUT/hyp.txt"
REF="$OUT/data/raw/valid.title"
[ "$(wc -l < "$OUT/hyp.txt")" = "$(wc -l < "$REF")" ] || die "not every validation article was decoded"

echo "== 4/4 ROUGE (fairseq_ext/analysis/rouge.py)"
log_run python -m fairseq_ext.analysis.rouge --hyp "$OUT/hyp.txt" --ref "$REF" --source "$OUT/data/raw/valid.article" \
  --json "$OUT/rouge.json"
python - "$ROOT" "$OUT" "$COMMANDS" "$START" "$TRAIN_SECONDS" "$GEN_SECONDS" "$ARCH" "$MASK" "$UPDATES" "$BEAM" "$SEED" \
  "$SCORED" "$SCORED_UPDATE" "$LAST_UPDATE" "$PATIENCE" "$EVERY" "$LENPEN" <<'EOF'
import json, os, platform, re, sys, time
root, out, commands, start, train_s, gen_s, arch, mask, updates, beam, seed = sys.argv[1:12]
checkpoint, (scored_update, last_update, patience, every), lenpen = sys.argv[12], map(int, sys.argv[13:17]), float(sys.argv[17])
import torch
rouge = json.load(open(os.path.join(out, "rouge.json")))
cpu = platform.machine()
try:
    cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
except (OSError, StopIteration):
    pass
params = re.search(r"num\. shared model params: ([\d,]+)", open(os.path.join(out, "train.log")).read())
valid = [l for l in open(os.path.join(out, "train.log")) if "| valid |" in l]
result = {
    "task": "gigaword headline generation, validation split", "model": arch, "attention_mask": mask,
    "updates": int(updates), "seed": int(seed), "beam": int(beam), "lenpen": lenpen, "sentences": rouge["sentences"],
    "checkpoint": checkpoint, "scored_update": scored_update, "trained_updates": last_update,
    "patience": patience, "validate_every": every if patience else None,
    "rouge1_f1": rouge["rouge1"], "rouge2_f1": rouge["rouge2"], "rougeL_f1": rouge["rougeL"],
    "scorer": "fairseq_ext.analysis.rouge (rouge-score, stemmed, mean sentence F1 x 100)",
    "parameters": int(params.group(1).replace(",", "")) if params else None,
    "last_valid_log": valid[-1].strip() if valid else None,
    "train_seconds": int(train_s), "generate_seconds": int(gen_s), "wall_seconds": int(time.time()) - int(start),
    "hardware": f"{cpu}, {os.cpu_count()} cores, {'cuda ' + torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu'}",
    "torch_threads": torch.get_num_threads(),
    "commands": [l.strip().replace(root + "/", "") for l in open(commands) if l.strip()],  # relative to the repository
}
json.dump(result, open(os.path.join(out, "results.json"), "w"), indent=2)
stop = f"; stopped early: validation ROUGE-1 did not improve for {patience} validation{'s' if patience > 1 else ''}" if patience and last_update < int(updates) else ""
print(f"ROUGE-1 {result['rouge1_f1']:.2f}  ROUGE-2 {result['rouge2_f1']:.2f}  ROUGE-L {result['rougeL_f1']:.2f} "
      f"on {result['sentences']} sentences, {checkpoint} (update {scored_update} of the {last_update} trained{stop}); "
      f"wrote {os.path.join(out, 'results.json')}")
EOF

#!/usr/bin/env bash
# XLNet-style permutation language modelling on raw text (Su 2019's "Permutation Language
# Model"): unilm_transformer trained on random factorisation orders (task permutation_lm),
# then evaluated with fairseq-validate in the natural order: perplexity per sentencepiece
# token of the held-out text, comparable with --mask causal (a plain left-to-right LM).
#
#   examples/unilm/permutation_lm.sh [--text FILE] [--out DIR] [--mask permutation|causal]
#       [--arch NAME] [--layers N] [--dim N] [--ffn N] [--heads N] [--updates N] [--max-tokens N]
#       [--lr LR] [--warmup N] [--tokens-per-sample N] [--vocab N] [--lines N] [--valid-lines N]
#
# --text (required): raw text, one paragraph a line (e.g. WikiText-2's wiki.valid.raw, which
#   data_prep/wikitext2.sh downloads);
#   blank lines are dropped, the last --valid-lines lines (default 300) are held out, --lines N
#   uses only the first N lines (smoke runs). Sequences are blocks of --tokens-per-sample.
# Writes OUT/results.json (natural-order loss and perplexity, commands, wall time, hardware).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
source "$ROOT/examples/progress.sh"
TEXT="" OUT="$ROOT/work/unilm-permutation-lm"
MASK="permutation" ARCH="unilm_transformer_tiny" LAYERS="" DIM="" FFN="" HEADS="" UPDATES=2000
MAX_TOKENS=4096 LR=5e-4 WARMUP=200 TPS=128 VOCAB=8000 LINES=0 VALID_LINES=300
die() { echo "error: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || die "option $1 needs a value"
  case "$1" in
    --text) TEXT="$2" ;; --out) OUT="$2" ;; --mask) MASK="$2" ;; --arch) ARCH="$2" ;;
    --layers) LAYERS="$2" ;; --dim) DIM="$2" ;; --ffn) FFN="$2" ;; --heads) HEADS="$2" ;;
    --updates) UPDATES="$2" ;; --max-tokens) MAX_TOKENS="$2" ;; --lr) LR="$2" ;; --warmup) WARMUP="$2" ;;
    --tokens-per-sample) TPS="$2" ;; --vocab) VOCAB="$2" ;; --lines) LINES="$2" ;;
    --valid-lines) VALID_LINES="$2" ;;
    *) die "unknown option $1 (see the header of $0)" ;;
  esac
  shift 2
done
case "$MASK" in permutation|causal) ;; *) die "--mask must be permutation or causal, got $MASK" ;; esac
[ -n "$TEXT" ] || die "pass --text FILE: raw text, one paragraph a line (see the header of $0)"
[ -s "$TEXT" ] || die "no text file $TEXT (pass --text FILE, one paragraph a line)"
mkdir -p "$OUT/raw"
export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore}"
START=$(date +%s)
COMMANDS="$OUT/commands.txt"; : > "$COMMANDS"
log_run() { printf '%q ' "$@" >> "$COMMANDS"; echo >> "$COMMANDS"; "$@"; }

echo "== 1/4 text: drop blank lines, hold out the last $VALID_LINES lines"
if [ "$LINES" -gt 0 ]; then head -n "$LINES" "$TEXT"; else cat "$TEXT"; fi > "$OUT/raw/input.txt"
grep -v '^[[:space:]]*$' "$OUT/raw/input.txt" > "$OUT/raw/all.txt" || true
TOTAL=$(wc -l < "$OUT/raw/all.txt")
echo "dropped $(( $(wc -l < "$OUT/raw/input.txt") - TOTAL )) blank or whitespace-only lines"
[ "$TOTAL" -gt "$VALID_LINES" ] || die "$TEXT has $TOTAL non-empty lines, not more than --valid-lines $VALID_LINES"
head -n "$((TOTAL - VALID_LINES))" "$OUT/raw/all.txt" > "$OUT/raw/train.txt"
tail -n "$VALID_LINES" "$OUT/raw/all.txt" > "$OUT/raw/valid.txt"

echo "== 2/4 sentencepiece ($VOCAB pieces) + fairseq-preprocess --only-source"
log_run python "$ROOT/data_prep/spm.py" train --model "$OUT/spm" --vocab-size "$VOCAB" "$OUT/raw/train.txt" \
  > "$OUT/prep.log" 2>&1 || { tail -5 "$OUT/prep.log"; exit 1; }
for split in train valid; do
  python "$ROOT/data_prep/spm.py" encode --model "$OUT/spm.model" < "$OUT/raw/$split.txt" > "$OUT/raw/$split.spm"
done
rm -rf "$OUT/bin"
log_run fairseq-preprocess --only-source --trainpref "$OUT/raw/train.spm" --validpref "$OUT/raw/valid.spm" \
  --destdir "$OUT/bin" --workers 2 >> "$OUT/prep.log" 2>&1 || { tail -5 "$OUT/prep.log"; exit 1; }

echo "== 3/4 fairseq-train: --task permutation_lm --attention-mask $MASK, $UPDATES updates"
SIZES=()
[ -n "$LAYERS" ] && SIZES+=(--encoder-layers "$LAYERS")
[ -n "$DIM" ] && SIZES+=(--encoder-embed-dim "$DIM")
[ -n "$FFN" ] && SIZES+=(--encoder-ffn-embed-dim "$FFN")
[ -n "$HEADS" ] && SIZES+=(--encoder-attention-heads "$HEADS")
rm -rf "$OUT/checkpoints"
TRAIN_START=$(date +%s)
log_run fairseq-train "$OUT/bin" --user-dir "$ROOT/fairseq_ext" --task permutation_lm \
  --sample-break-mode none --tokens-per-sample "$TPS" --arch "$ARCH" "${SIZES[@]}" --attention-mask "$MASK" \
  --criterion cross_entropy --optimizer adam --adam-betas '(0.9,0.98)' --lr "$LR" \
  --lr-scheduler inverse_sqrt --warmup-updates "$WARMUP" --clip-norm 1.0 --max-tokens "$MAX_TOKENS" \
  --max-update "$UPDATES" --save-dir "$OUT/checkpoints" --no-epoch-checkpoints --log-format simple \
  --log-interval 50 --seed 1 2>&1 | fairseq_progress "$OUT/train.log" || { tail -20 "$OUT/train.log"; exit 1; }
TRAIN_SECONDS=$(( $(date +%s) - TRAIN_START ))
grep -E "\| (train|valid) \|" "$OUT/train.log" | tail -2 | cut -c1-160

echo "== 4/4 fairseq-validate: perplexity in natural order"
log_run fairseq-validate "$OUT/bin" --user-dir "$ROOT/fairseq_ext" --task permutation_lm \
  --path "$OUT/checkpoints/checkpoint_best.pt" --valid-subset valid --max-tokens "$MAX_TOKENS" \
  > "$OUT/validate.log" 2>&1 || { tail -20 "$OUT/validate.log"; exit 1; }
python - "$OUT" "$COMMANDS" "$START" "$TRAIN_SECONDS" "$ARCH" "$MASK" "$UPDATES" "$TPS" <<'EOF'
import json, os, platform, re, sys, time
out, commands, start, train_s, arch, mask, updates, tps = sys.argv[1:]
import torch
log = open(os.path.join(out, "validate.log")).read()
m = re.search(r"valid on 'valid' subset \| loss ([\d.]+) \| ppl ([\d.]+)", log)
if not m:
    sys.exit(f"error: no validation line in {os.path.join(out, 'validate.log')}")
cpu = platform.machine()
try:
    cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
except (OSError, StopIteration):
    pass
params = re.search(r"num\. shared model params: ([\d,]+)", open(os.path.join(out, "train.log")).read())
result = {
    "task": "permutation_lm", "model": arch, "attention_mask": mask, "updates": int(updates),
    "tokens_per_sample": int(tps),
    "valid_loss_bits_per_token": float(m.group(1)), "valid_ppl_natural_order": float(m.group(2)),
    "unit": "per sentencepiece token of the held-out lines, natural (left-to-right) order",
    "parameters": int(params.group(1).replace(",", "")) if params else None,
    "train_seconds": int(train_s), "wall_seconds": int(time.time()) - int(start),
    "hardware": f"{cpu}, {os.cpu_count()} cores, {'cuda ' + torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu'}",
    "torch_threads": torch.get_num_threads(),
    "commands": [l.strip() for l in open(commands) if l.strip()],
}
json.dump(result, open(os.path.join(out, "results.json"), "w"), indent=2)
print(f"natural-order perplexity {result['valid_ppl_natural_order']:.2f} ({mask} training, {updates} updates); "
      f"wrote {os.path.join(out, 'results.json')}")
EOF

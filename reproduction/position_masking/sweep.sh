#!/usr/bin/env bash
# Table 3 (docs/results/position-masking.md): the paper's percentage sweep (Wagner et al.
# 2020, section 5.1, Figure 7) at equal budgets, then the effect on one downstream
# fine-tuning. The same data, model, seed and number of updates for --position-mask-prob 0,
# 0.05, 0.10 and 0.15 (0 is "without position masking", 0.10 the paper's default "with"), run
# one after another; then each checkpoint, and the same model from a random initialisation,
# fine-tuned with fairseq's sentence_prediction on a word-order task built from the same text
# (data_prep/word_order.py: is a span of 4 words shuffled?), with the same updates, batch and
# seed.
#   reproduction/position_masking/sweep.sh [--work DIR] [--out DIR] [--wikitext FILE_OR_DIR]
#       [--probs "0 0.05 0.10 0.15"] [--updates N] [--finetune-updates N]
# --updates: pre-training updates per setting (default 1500: the CPU scale, about 45 minutes
#   for the whole script on 2 idle CPU cores); --finetune-updates: 0 skips the downstream task
#   (default 1000). Environment: ARCH, BATCH, LR, ... as in pretrain.sh (the fine-tuning uses
#   finetune.sh's defaults). Writes WORK/runs/p*/train.log, WORK/finetune/*/train.log, and in
#   OUT (default WORK): mlm_accuracy.png, position_accuracy.png, downstream_accuracy.png,
#   results.json, results.md and commands.json (the commands, wall time and hardware).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"  # the collectors import reproduction.*
WORK="$ROOT/work/position_masking" OUT="" WIKI=""
PROBS="0 0.05 0.10 0.15" UPDATES=1500 FT_UPDATES=1000 ARGV="$*"
while [ $# -gt 0 ]; do
  case "$1" in
    --work) WORK="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --wikitext) WIKI="$2"; shift 2 ;;
    --probs) PROBS="$2"; shift 2 ;;
    --updates) UPDATES="$2"; shift 2 ;;
    --finetune-updates) FT_UPDATES="$2"; shift 2 ;;
    *) echo "error: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
[[ "$UPDATES" =~ ^[1-9][0-9]*$ && "$FT_UPDATES" =~ ^[0-9]+$ ]] \
  || { echo "error: --updates must be >= 1 and --finetune-updates >= 0" >&2; exit 2; }
OUT="${OUT:-$WORK}"
export UPDATES
START=$(date +%s)
LOCAL=()
if [ -n "$WIKI" ]; then
  [ -e "$WIKI" ] || { echo "error: --wikitext $WIKI does not exist" >&2; exit 2; }
  LOCAL=(--local "$WIKI")
fi
[ -s "$WORK/data/bin/dict.txt" ] || bash "$ROOT/data_prep/wikitext2.sh" "${LOCAL[@]}" --out "$WORK/data"
RUNS=() FINETUNED=()
for p in $PROBS; do
  echo "== pre-training, --position-mask-prob $p, $UPDATES updates"
  [ -s "$WORK/runs/p$p/checkpoint_last.pt" ] || PROB="$p" bash "$ROOT/examples/position_masking/pretrain.sh" "$WORK/data/bin" "$WORK/runs/p$p"
  RUNS+=("$p=$WORK/runs/p$p")
done
if [ "$FT_UPDATES" -gt 0 ]; then
  [ -s "$WORK/word_order/bin/label/dict.txt" ] || python "$ROOT/data_prep/word_order.py" --raw "$WORK/data/raw" \
    --spm "$WORK/data/spm.model" --dict "$WORK/data/bin/dict.txt" --out "$WORK/word_order"
  for p in $PROBS none; do
    ckpt="$WORK/runs/p$p/checkpoint_last.pt"
    [ "$p" = none ] && ckpt=none
    echo "== fine-tuning on word order from ${ckpt}, $FT_UPDATES updates"
    UPDATES="$FT_UPDATES" bash "$ROOT/examples/position_masking/finetune.sh" "$ckpt" "$WORK/word_order/bin" "$WORK/finetune/$p"
    FINETUNED+=(--finetune "$p=$WORK/finetune/$p")
  done
fi
PAGE=()  # the published folder's table goes into the results page
[ "$(realpath -m "$OUT")" = "$(realpath -m "$HERE/results")" ] && PAGE=(--page "$ROOT/docs/results/position-masking.md")
python "$HERE/plot.py" --out "$OUT" "${PAGE[@]}" "${RUNS[@]}" "${FINETUNED[@]}"
python - "$OUT" "$UPDATES" "$FT_UPDATES" "$(( $(date +%s) - START ))" "$ARGV" <<'PY'
import json, os, sys
import torch
out, updates, ft_updates, seconds, argv = sys.argv[1:]
cpu = "unknown"
if os.path.exists("/proc/cpuinfo"):
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), cpu)
json.dump({"command": f"reproduction/position_masking/sweep.sh {argv}".strip(), "pretrain_updates": int(updates),
           "finetune_updates": int(ft_updates), "wall_seconds": int(seconds),
           "hardware": {"cpu": cpu, "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}},
          open(os.path.join(out, "commands.json"), "w"), indent=2)
print(f"{seconds} s in all -> {out}/commands.json")
PY

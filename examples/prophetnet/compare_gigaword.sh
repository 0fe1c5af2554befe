#!/usr/bin/env bash
# ProphetNet vs Transformer vs UniLM on Gigaword (README, Results, table 2): ROUGE-1/2/L F1 on
# the 1000 validation pairs for ProphetNet with --ngram 1 (plain next-token), 2 and 3, each
# without and with span-masking pre-training on the article side, fairseq's plain Transformer
# of the same sizes, and the UniLM prefix-mask model of about the same size (6 x 256 against
# ProphetNet's 3+3 x 256). Same data, sentencepiece vocabulary (10k), fine-tuning budget,
# batch size, beam 4, length penalty 1.0, no-repeat-ngram 3 and ROUGE scorer for every row.
#
#   examples/prophetnet/compare_gigaword.sh [--scale cpu|full] [--work DIR] [--only "NAMES"]
# --scale cpu (default): 300 fine-tuning and 100 pre-training updates of 2048 tokens, under an
#   hour on 2 idle CPU cores (a comparison of early training, not of converged models);
#   full: 3000 and 1000 updates of 4096 tokens (a GPU, or a long CPU run).
# --only: a subset of run names (p1 p2 p3 p1-pt p2-pt p3-pt transformer unilm).
# Writes DIR/results.json, DIR/results.md and DIR/rouge.png; each run's own results.json
# (commands, wall time, hardware) stays in DIR/runs/NAME.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
WORK="$ROOT/work/gigaword-comparison" SCALE=cpu ONLY="p1 p2 p3 p1-pt p2-pt p3-pt transformer unilm"
while [ $# -gt 0 ]; do
  case "$1" in
    --scale) SCALE="$2"; shift 2 ;; --work) WORK="$2"; shift 2 ;; --only) ONLY="$2"; shift 2 ;;
    *) echo "error: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
case "$SCALE" in
  cpu) FT=300 PT=100 TOK=2048 ;;
  full) FT=3000 PT=1000 TOK=4096 ;;
  *) echo "error: --scale must be cpu or full" >&2; exit 2 ;;
esac
DATA="$ROOT/../shared/data/gigaword"
DATA_ARGS=()
[ -d "$DATA" ] && DATA_ARGS=(--data "$DATA")
mkdir -p "$WORK/runs"
START=$(date +%s)
for name in $ONLY; do
  out="$WORK/runs/$name"
  [ -s "$out/results.json" ] && continue
  echo "== $name"
  case "$name" in
    p[123]) bash "$HERE/gigaword.sh" "${DATA_ARGS[@]}" --prep "$WORK/data" --work "$out" --ngram "${name#p}" \
              --pretrain-updates 0 --finetune-updates "$FT" --max-tokens "$TOK" ;;
    p[123]-pt) n="${name#p}"; bash "$HERE/gigaword.sh" "${DATA_ARGS[@]}" --prep "$WORK/data" --work "$out" \
              --ngram "${n%-pt}" --pretrain-updates "$PT" --finetune-updates "$FT" --max-tokens "$TOK" ;;
    transformer) bash "$HERE/gigaword.sh" "${DATA_ARGS[@]}" --prep "$WORK/data" --work "$out" --model transformer \
              --finetune-updates "$FT" --max-tokens "$TOK" ;;
    unilm) bash "$ROOT/examples/unilm/gigaword.sh" "${DATA_ARGS[@]}" --out "$out" --layers 6 --dim 256 --ffn 1024 \
              --heads 4 --updates "$FT" --warmup 200 --lr 7e-4 --max-tokens "$TOK" --no-repeat-ngram 3 ;;
    *) echo "error: unknown run $name" >&2; exit 2 ;;
  esac
done
python - "$WORK" "$SCALE" "$FT" "$PT" "$TOK" "$(( $(date +%s) - START ))" <<'PY'
import json, os, sys
work, scale, ft, pt, tok, seconds = sys.argv[1:]
label = {"p1": "ProphetNet n=1", "p2": "ProphetNet n=2", "p3": "ProphetNet n=3",
         "p1-pt": "ProphetNet n=1 + span pre-training", "p2-pt": "ProphetNet n=2 + span pre-training",
         "p3-pt": "ProphetNet n=3 + span pre-training", "transformer": "Transformer (same sizes)",
         "unilm": "UniLM prefix mask (6 x 256)"}
rows = {}
for name in label:
    path = os.path.join(work, "runs", name, "results.json")
    if os.path.exists(path):
        rows[name] = json.load(open(path))
summary = {"scale": scale, "finetune_updates": int(ft), "pretrain_updates": int(pt), "max_tokens": int(tok),
           "wall_seconds_this_call": int(seconds),
           "runs": {k: {"label": label[k], "rouge1": v["rouge1_f1"], "rouge2": v["rouge2_f1"],
                        "rougeL": v["rougeL_f1"], "sentences": v["sentences"]} for k, v in rows.items()}}
json.dump(summary, open(os.path.join(work, "results.json"), "w"), indent=2)
lines = ["| model | ROUGE-1 | ROUGE-2 | ROUGE-L |", "|---|---|---|---|"]
for k, v in summary["runs"].items():
    lines.append(f"| {v['label']} | {v['rouge1']:.2f} | {v['rouge2']:.2f} | {v['rougeL']:.2f} |")
open(os.path.join(work, "results.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
names = list(summary["runs"])
fig, ax = plt.subplots(figsize=(8, 4))
for i, metric in enumerate(("rouge1", "rouge2", "rougeL")):
    ax.bar([j + 0.27 * i for j in range(len(names))], [summary["runs"][n][metric] for n in names], width=0.27,
           label=metric.upper().replace("ROUGE", "ROUGE-"))
ax.set_xticks([j + 0.27 for j in range(len(names))], [summary["runs"][n]["label"] for n in names],
              rotation=30, ha="right", fontsize=7)
ax.set(ylabel="F1 x 100", title=f"Gigaword valid (1000 pairs), {scale} scale: {ft} fine-tuning updates")
ax.legend()
fig.tight_layout()
fig.savefig(os.path.join(work, "rouge.png"), dpi=120)
print(f"wrote {work}/results.json, results.md, rouge.png")
PY

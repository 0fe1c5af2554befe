#!/usr/bin/env bash
# The shipped quickstart student against the one it replaced, on Multi30k val (1014 sentences).
#   reproduction/hi_cmlm/shipped_models.sh [--old-commit REV] [--work DIR] [--no-publish]
#                                  [--student-command TEXT] [--student-threads N]
# --old-commit REV  the commit whose examples/quickstart/model/checkpoint.pt is the old model
#                   (default 7abf52b, the last one before the 3+1 student: the 3+3 student
#                   trained as the HI-CMLM paper trains, section 3.3)
# --work DIR        the folder the new student was trained in (examples/quickstart/pretrain.sh
#                   --work DIR: DIR/data and DIR/student.log); default work/quickstart-pretrain
# --student-command, --student-threads  how the new student was trained (recorded with the log
#                   DIR/student.log; default: examples/quickstart/pretrain.sh --work DIR --teacher
#                   examples/quickstart/model/teacher.pt, with OMP_NUM_THREADS threads)
# Both models are decoded with each of the four strategies (python -m reproduction.hi_cmlm.val_decode:
# each keeps the fence it was trained with), 10 passes, length beam 3 (the quickstart's setting),
# every pass kept. collect_shipped.py then writes reproduction/hi_cmlm/shipped.json: BLEU after
# passes 1/2/4/10, by reference length, and sacreBLEU's paired bootstrap new vs old per strategy.
# A finished decoding is not redone. About 20 minutes on one CPU core.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
OLD_COMMIT=7abf52b WORK="$ROOT/work/quickstart-pretrain" PUBLISH=1 STUDENT_COMMAND="" STUDENT_THREADS="${OMP_NUM_THREADS:-2}"
GIVEN=("reproduction/hi_cmlm/shipped_models.sh" "$@")
while [ $# -gt 0 ]; do
  case "$1" in
    --old-commit) OLD_COMMIT="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --no-publish) PUBLISH=0; shift ;;
    --student-command) STUDENT_COMMAND="$2"; shift 2 ;;
    --student-threads) STUDENT_THREADS="$2"; shift 2 ;;
    *) echo "error: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
DATA="$WORK/data/bin"
REL_WORK=$(python -c "import os,sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))" "$WORK" "$ROOT")
STUDENT_COMMAND="${STUDENT_COMMAND:-examples/quickstart/pretrain.sh --work $REL_WORK --teacher examples/quickstart/model/teacher.pt}"
[ -s "$DATA/valid.en-de.en.bin" ] || { echo "error: $DATA has no valid split: run reproduction/hi_cmlm/multi30k.sh (or examples/quickstart/pretrain.sh --stage data --work $WORK) first" >&2; exit 2; }
OUT="$WORK/shipped"
mkdir -p "$OUT/old" "$OUT/new"
OLD_PATH=examples/quickstart/model/checkpoint.pt
# from the commit that made it a link to the package's file on, the student is that file
[ "$(git -C "$ROOT" ls-tree "$OLD_COMMIT" "$OLD_PATH" | cut -d' ' -f1)" != 120000 ] \
  || OLD_PATH=fairseq_ext/hub/models/hi-cmlm-multi30k-en-de/checkpoint.pt
if [ ! -s "$OUT/old/checkpoint.pt" ]; then
  git -C "$ROOT" show "$OLD_COMMIT:$OLD_PATH" > "$OUT/old/checkpoint.pt.part" \
    || { echo "error: commit $OLD_COMMIT has no $OLD_PATH (this needs the git history)" >&2; exit 2; }
  mv "$OUT/old/checkpoint.pt.part" "$OUT/old/checkpoint.pt"
fi
cp -p "$ROOT/examples/quickstart/model/checkpoint.pt" "$OUT/new/checkpoint.pt"
for model in old new; do
  for S in all_mask all_copied weighted_sum fence_replace; do
    score=$(python -m reproduction.hi_cmlm.val_decode --data "$DATA" --checkpoint "$OUT/$model/checkpoint.pt" \
      --ref "$WORK/data/raw/val.de" --out "$OUT/$model/decode-$S" --strategy "$S")
    echo "$model $S: $score"
  done
done
PUB=()
[ "$PUBLISH" = 1 ] && PUB=(--publish "$HERE" --page "$ROOT/docs/results/hi-cmlm.md")
python -m reproduction.hi_cmlm.collect_shipped --work "$OUT" --ref "$WORK/data/raw/val.de" \
  --old-commit "$OLD_COMMIT" --command "${GIVEN[*]}" --teacher "$ROOT/examples/quickstart/model/teacher.pt" \
  --student-log "$WORK/student.log" --student-command "$STUDENT_COMMAND" --student-threads "$STUDENT_THREADS" \
  "${PUB[@]}"

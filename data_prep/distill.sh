#!/usr/bin/env bash
# Sequence-level knowledge distillation (Kim & Rush 2016; Gu et al. 2018; Zhou et al. 2020):
# train an autoregressive fairseq `transformer` teacher, then rewrite the training targets
# with its beam-search output (`fairseq-generate --gen-subset train`). NAT results in the
# literature are reported on such distilled targets.
#
#   data_prep/distill.sh --data BIN --out DIR [--src en] [--tgt de] [--teacher CKPT]
#                        [--hours 0.35] [--beam 5] [--teacher-args "..."]
# BIN:  a fairseq-preprocess folder (joined dictionary). DIR/bin gets the distilled train
#       split plus the original valid/test splits and dictionaries; DIR/teacher the teacher.
# --teacher CKPT skips teacher training and uses an existing checkpoint; without it the
# teacher trains (or resumes) until --hours of cumulative training time.
source "$(dirname "$0")/common.sh"
# --user-dir: the plugin's safe loader lets fairseq (torch >= 2.6) resume and decode its own
# checkpoints, which stock fairseq-train/-generate refuse (argparse.Namespace is not allowed).
USER_DIR="$(cd "$DATA_PREP_DIR/.." && pwd)/fairseq_ext"

DATA="" OUT="" SRC=en TGT=de TEACHER="" HOURS=0.35 BEAM=5
TEACHER_ARGS="--arch transformer --encoder-layers 3 --decoder-layers 3 --encoder-embed-dim 192 \
--decoder-embed-dim 192 --encoder-ffn-embed-dim 768 --decoder-ffn-embed-dim 768 \
--encoder-attention-heads 4 --decoder-attention-heads 4 --share-all-embeddings --dropout 0.3 \
--optimizer adam --adam-betas (0.9,0.98) --lr 1e-3 --lr-scheduler inverse_sqrt --warmup-updates 1000 \
--clip-norm 1.0 --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --max-tokens 4096"
while [ $# -gt 0 ]; do
  case "$1" in
    --data) DATA="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --src) SRC="$2"; shift 2 ;;
    --tgt) TGT="$2"; shift 2 ;;
    --teacher) TEACHER="$2"; shift 2 ;;
    --hours) HOURS="$2"; shift 2 ;;
    --beam) BEAM="$2"; shift 2 ;;
    --teacher-args) TEACHER_ARGS="$2"; shift 2 ;;
    *) die "unknown option $1 (see: bash $0 --help)" ;;
  esac
done
[ -n "$DATA" ] && [ -n "$OUT" ] || die "--data and --out are required"
[ -s "$DATA/dict.$SRC.txt" ] || die "$DATA has no dict.$SRC.txt: run a data_prep script first"
mkdir -p "$OUT/teacher" "$OUT/bin"

if [ -z "$TEACHER" ]; then
  # Resumes from $OUT/teacher/checkpoint_last.pt if present; --stop-time-hours counts the
  # cumulative training time, so re-running with a larger --hours trains the teacher further.
  TEACHER="$OUT/teacher/checkpoint_last.pt"
  # shellcheck disable=SC2086
  fairseq-train "$DATA" --user-dir "$USER_DIR" --task translation -s "$SRC" -t "$TGT" $TEACHER_ARGS \
    --stop-time-hours "$HOURS" --max-epoch 200 --save-dir "$OUT/teacher" --no-epoch-checkpoints \
    --log-format simple --log-interval 100 --seed 1 2>&1 | tee -a "$OUT/teacher/train.log" >&2
fi

if [ -s "$OUT/bin/train.$SRC-$TGT.$TGT.bin" ] && [ "$OUT/bin/train.$SRC-$TGT.$TGT.bin" -nt "$TEACHER" ]; then
  echo "distilled data in $OUT/bin is newer than $TEACHER; nothing to do" >&2
  exit 0
fi
# --required-batch-size-multiple 1: stock fairseq drops the final batch otherwise
# (upstream issue 5036), which would silently lose training pairs here.
fairseq-generate "$DATA" --user-dir "$USER_DIR" --task translation -s "$SRC" -t "$TGT" --path "$TEACHER" \
  --gen-subset train --beam "$BEAM" --batch-size 128 --required-batch-size-multiple 1 \
  --log-format simple --log-interval 20 2>&1 > "$OUT/teacher/generate-train.txt" \
  | tee "$OUT/teacher/generate-train.log" | { grep --line-buffered ' wps=' || true; } | sed -u 's/^INFO:[^:]*:* */  decoding: /' >&2 \
  || { tail -20 "$OUT/teacher/generate-train.log" >&2; die "teacher decoding failed"; }

N=$(grep -c '^S-' "$OUT/teacher/generate-train.txt")
WANT=$("$PYTHON" -c "import sys; from fairseq.data import data_utils; \
print(len(data_utils.load_indexed_dataset(sys.argv[1], None)))" "$DATA/train.$SRC-$TGT.$SRC")
[ "$N" = "$WANT" ] || die "teacher decoded $N of $WANT training sentences"

mkdir -p "$OUT/text"
grep '^S-' "$OUT/teacher/generate-train.txt" | sed 's/^S-//' | sort -n -k1,1 | cut -f2 > "$OUT/text/train.$SRC"
grep '^H-' "$OUT/teacher/generate-train.txt" | sed 's/^H-//' | sort -n -k1,1 | cut -f3 > "$OUT/text/train.$TGT"
preprocess "$OUT/bin" "$OUT/preprocess.log" -s "$SRC" -t "$TGT" --trainpref "$OUT/text/train" \
  --srcdict "$DATA/dict.$SRC.txt" --joined-dictionary --workers 2
for f in "$DATA"/valid.* "$DATA"/test.*; do [ -e "$f" ] && cp "$f" "$OUT/bin/"; done
echo "distilled $N training pairs into $OUT/bin (teacher $TEACHER)" >&2

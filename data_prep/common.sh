# Shared shell helpers for data_prep/*.sh (sourced, not run).
# Every script: download from the original source when there is a network, or take
# --local DIR (a copy of the data on disk) when there is none.

set -euo pipefail
DATA_PREP_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python}"

die() { echo "error: $*" >&2; exit 2; }

# -h / --help: the calling script's header comment (its usage and options), exit 0.
for arg in "$@"; do
  case "$arg" in
    -h|--help) awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
  esac
done

# fetch URL DEST: download with curl or wget, failing with a clear message offline.
fetch() {
  local url="$1" dest="$2"
  [ -s "$dest" ] && return 0
  echo "downloading $url" >&2
  if command -v curl >/dev/null; then
    curl -fsSL --retry 2 -o "$dest.part" "$url" || die "could not download $url (offline? pass --local DIR)"
  else
    wget -q -O "$dest.part" "$url" || die "could not download $url (offline? pass --local DIR)"
  fi
  mv "$dest.part" "$dest"
}

# check_utf8 FILE...: stop with one line naming the first file, line and byte that is not UTF-8
# (and iconv as the fix), before anything is made from them.
check_utf8() { "$PYTHON" "$DATA_PREP_DIR/spm.py" check-utf8 "$@"; }

# check_dictionaries DICT...: stop with one line naming the first dictionary that is cut short,
# repeats a token or has a line without its count (fairseq-preprocess --srcdict: a traceback).
check_dictionaries() {
  "$PYTHON" -c 'import sys; from fairseq_ext.checkpoints.dictionaries import main
sys.exit(main(sys.argv[1:]))' "$@" || exit 1
}

# preprocess DEST LOG ARGS...: fairseq-preprocess ARGS --destdir DEST.partial, moved to DEST only
# when complete (its output in LOG), so that a full disk or a kill leaves no cut dict.*.txt under
# DEST and the same command can run again; on a failure DEST.partial is removed and an earlier
# DEST is kept. A --srcdict or --tgtdict is checked first (check_dictionaries).
preprocess() {
  local dest="$1" log="$2" output arg previous=""; shift 2
  for arg in "$@"; do
    case "$previous" in --srcdict|--tgtdict) check_dictionaries "$arg" ;; esac
    previous="$arg"
  done
  rm -rf "$dest.partial"
  if ! output=$(fairseq-preprocess "$@" --destdir "$dest.partial" 2>&1); then
    rm -rf "$dest.partial"
    if grep -q "No space left on device" <<<"$output"; then
      local kept="no $dest was made"
      [ -d "$dest" ] && kept="the earlier $dest is kept"
      die "no space left on the device while fairseq-preprocess wrote $dest.partial (removed; $kept); free space there (df -h) and run the same command again"
    fi
    printf '%s\n' "$output" | tail -20 >&2
    die "fairseq-preprocess failed (its last lines above)"
  fi
  rm -rf "$dest"
  mv "$dest.partial" "$dest"
  printf '%s\n' "$output" > "$log"
}

# read_text FILE: cat a plain or gzipped file.
read_text() { case "$1" in *.gz) gzip -dc "$1" ;; *) cat "$1" ;; esac; }

# spm_and_binarize OUT SRC TGT VOCAB TRAINPREF VALIDPREF [TESTPREF]
# Trains a joint sentencepiece model on the training pair (unless OUT/spm.model exists or
# SPM_MODEL is set), encodes every split, and binarizes with one joined dictionary
# (SRCDICT, if set, is reused instead of building a new one; the model must be the one it was
# built with: fairseq_ext/common/tokenizer_check.py stops the script otherwise).
spm_and_binarize() {
  local out="$1" src="$2" tgt="$3" vocab="$4" trainpref="$5" validpref="$6" testpref="${7:-}"
  local model="${SPM_MODEL:-$out/spm.model}"
  mkdir -p "$out/spm"
  if [ ! -s "$model" ]; then
    "$PYTHON" "$DATA_PREP_DIR/spm.py" train --model "$out/spm" --vocab-size "$vocab" \
      "$trainpref.$src" "$trainpref.$tgt"
    model="$out/spm.model"
  fi
  if [ -n "${SRCDICT:-}" ]; then  # the model must be the one SRCDICT was built with (one line if not)
    "$PYTHON" -m fairseq_ext.common.tokenizer_check "$model" "$SRCDICT" || exit 1
  fi
  local split pref
  for split in train valid test; do
    case "$split" in train) pref="$trainpref" ;; valid) pref="$validpref" ;; test) pref="$testpref" ;; esac
    [ -n "$pref" ] || continue
    for l in "$src" "$tgt"; do
      "$PYTHON" "$DATA_PREP_DIR/spm.py" encode --model "$model" < "$pref.$l" > "$out/spm/$split.$l"
    done
  done
  local dict_args=(--joined-dictionary)
  if [ -n "${SRCDICT:-}" ]; then dict_args=(--srcdict "$SRCDICT" --joined-dictionary); fi
  local test_args=()
  [ -n "$testpref" ] && test_args=(--testpref "$out/spm/test")
  preprocess "$out/bin" "$out/preprocess.log" --source-lang "$src" --target-lang "$tgt" \
    --trainpref "$out/spm/train" --validpref "$out/spm/valid" "${test_args[@]}" "${dict_args[@]}" --workers 2
  echo "binarized data in $out/bin (sentencepiece model $model)" >&2
}

# Progress on the terminal while a fairseq command's whole output goes to a file (sourced by
# the scripts of examples/, not run).
#
#   fairseq-train ... 2>&1 | fairseq_progress [-a] LOG
#   fairseq-generate ... --log-format simple --log-interval 4 2>&1 > OUT | fairseq_progress ERR
#
# Copies its input to LOG (-a: appends) and prints fairseq's own progress lines as they come,
# without their time stamp: fairseq-train's every --log-interval updates (train_inner), each
# validation and end of epoch; fairseq-generate's batches (its "N / M wps=" lines on stderr with
# --log-format simple). Under `set -o pipefail` the pipeline fails when the fairseq command does.
# LOG is the record of the run: the commands of the plugin's tasks log everything there, their
# configuration and set-up included, as with --verbose (FAIRSEQ_EXT_VERBOSE=1, docs/output.md).
export FAIRSEQ_EXT_VERBOSE=1
fairseq_progress() {
  local append=()
  if [ "$1" = -a ]; then append=(-a); shift; fi
  tee "${append[@]}" "$1" | { grep --line-buffered -E '\| (train_inner|train|valid) \|| wps=' || true; } \
    | sed -u -E -e 's/^.*\| INFO \| /  /' -e 's/^INFO:fairseq\.logging\.progress_bar:+ */  decoding: /' \
      -e 's/^(.{170}).*/\1/'
}

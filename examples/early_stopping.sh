# Early stopping on validation ROUGE-1 for the Gigaword scripts of examples/ (sourced, not run).
#
#   rouge_early_stopping PATIENCE EVERY BEAM NO_REPEAT [TASK OPTIONS ...]
#
# PATIENCE 0 (the scripts' default): STOPPING=() and SCORED=checkpoint_last.pt, training runs its
# fixed number of updates. PATIENCE >= 1: STOPPING holds fairseq-train's options for fairseq's own
# early stopping: --eval-rouge (the scripts' decoding: beam BEAM, length penalty 1.0, no repeated
# NO_REPEAT-gram, at most 40 tokens; TASK OPTIONS such as --eval-rouge-detok wordpiece
# --eval-rouge-wordpiece-tokenizer DIR say how pieces become text) at a validation every EVERY
# updates and at no epoch end, a checkpoint at each (the newest interval checkpoint kept),
# checkpoint_best.pt by the highest validation ROUGE-1, and --patience PATIENCE: training stops
# when ROUGE-1 has not improved for PATIENCE validations. SCORED=checkpoint_best.pt.
#
#   checkpoint_update CKPT...  prints the update counts the fairseq checkpoints were saved at, on one line
#   require_lenpen LENPEN      refuses (die) a --lenpen that is not a plain number such as 1.0 or 1.2
rouge_early_stopping() {
  local patience="$1" every="$2" beam="$3" no_repeat="$4"
  shift 4
  for n in "$patience" "$every" "$beam" "$no_repeat"; do
    [[ "$n" =~ ^[0-9]+$ ]] || die "--patience, --validate-every, the beam and the n-gram size take whole numbers, got '$n'"
  done
  STOPPING=() SCORED=checkpoint_last.pt
  [ "$patience" -gt 0 ] || return 0
  [ "$every" -ge 1 ] || die "--validate-every must be >= 1 with --patience"
  STOPPING=(--eval-rouge --eval-rouge-args
    "{\"beam\": $beam, \"lenpen\": 1.0, \"no_repeat_ngram_size\": $no_repeat, \"max_len_a\": 0, \"max_len_b\": 40}" "$@"
    --validate-interval-updates "$every" --save-interval-updates "$every" --keep-interval-updates 1
    --validate-interval 1000000 --save-interval 1000000
    --best-checkpoint-metric rouge1 --maximize-best-checkpoint-metric --patience "$patience")
  SCORED=checkpoint_best.pt
}

checkpoint_update() {
  python -c "import sys; from fairseq_ext.checkpoints import safe_load
print(*(safe_load(path)['optimizer_history'][-1]['num_updates'] for path in sys.argv[1:]))" "$@"
}

require_lenpen() {
  [[ "$1" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--lenpen takes a number such as 1.0, got '$1'"
}

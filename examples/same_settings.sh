# shellcheck shell=bash
# For the scripts of examples/ (sourced, not run).
#
#   same_settings DIR WHAT SETTINGS [OPTION]
#
# DIR holds the work of one set of settings. The first call records SETTINGS in DIR/settings; a
# later call with other settings stops with one line ("DIR holds WHAT with other settings (...);
# give another OPTION or remove DIR", OPTION the script's option that names DIR, --work by
# default) instead of resuming, reusing or scoring a checkpoint trained with the earlier ones.
# fairseq-train refuses a resume with other model options itself (with a plugin task; see
# docs/reliability.md); the scripts keep this check for the rest of their settings (data, budget,
# learning rate) and for a training they find finished, which they do not run again.
same_settings() {
  local dir="$1" what="$2" settings="$3" option="${4:---work}" kept
  mkdir -p "$dir"
  kept="$(cat "$dir/settings" 2>/dev/null || true)"
  if [ -n "$kept" ] && [ "$kept" != "$settings" ]; then
    echo "error: $dir holds $what with other settings ($kept); give another $option or remove $dir" >&2
    exit 2
  fi
  echo "$settings" > "$dir/settings"
}

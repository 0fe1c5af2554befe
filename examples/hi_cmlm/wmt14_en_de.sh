#!/usr/bin/env bash
# HI-CMLM on wmt14_en_de with the paper's hyper-parameters: see paper_recipe.sh for the options.
exec bash "$(dirname "$0")/paper_recipe.sh" --dataset wmt14_en_de "$@"

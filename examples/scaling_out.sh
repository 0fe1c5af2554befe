#!/usr/bin/env bash
# Distributed training of every model family on fairseq's own distributed path.
#
#   examples/scaling_out.sh FAMILY MODE DATA [extra fairseq-train options ...]
#
# FAMILY: hi_cmlm | prophetnet | posmask | unilm | permutation_lm (the training command of
#   each family's page under docs/, at the paper's model size)
# MODE:
#   gpus              one node, every GPU: fairseq spawns one process per GPU (NCCL)
#   torchrun          one node, every GPU, processes started by torchrun (NCCL)
#   multinode         NNODES nodes, fairseq's own launcher: run the same command on every node
#                     with its NODE_RANK; rank 0's MASTER_ADDR:MASTER_PORT is the rendezvous
#                     (--distributed-init-method tcp://...), each node spawns GPUS processes
#   torchrun-multinode  NNODES nodes, torchrun's c10d rendezvous at MASTER_ADDR:MASTER_PORT
#                     (run the same command on every node; no node rank needed)
#   cpu-gloo          NPROC processes on this machine's CPU with gloo: the recipe the tests run
#                     (tests/test_reliability.py), for trying the distributed path without GPUs
# Environment: GPUS (per node; default: the number nvidia-smi lists, else 8), NNODES (2),
#   NODE_RANK (0), MASTER_ADDR (127.0.0.1), MASTER_PORT (29500), NPROC (2, cpu-gloo),
#   SAVE_DIR (checkpoints/FAMILY), DDP_BACKEND (see below), DRY_RUN=1 prints the commands
#   (one a line, shell-quoted) instead of running them.
#
# --ddp-backend: legacy_ddp (fairseq's own all-reduce after the backward pass) is what the
# tests check on CPU, for every family, and works everywhere. c10d (PyTorch's DDP, which
# overlaps the all-reduce with the backward pass; the GPU default here) needs every parameter
# to get a gradient: unilm (seq2seq) never uses its next-position embedding, so its commands
# add --find-unused-parameters. fairseq's c10d refuses CPU modules, so CPU runs use legacy_ddp.
# --max-tokens / --batch-size are per GPU: the effective batch is that x GPUs x --update-freq.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
die() { echo "error: $*" >&2; exit 2; }
[ $# -ge 3 ] || die "usage: $0 FAMILY MODE DATA [fairseq-train options] (see the header of $0)"
FAMILY="$1" MODE="$2" DATA="$3"
shift 3

gpu_count() {
  if command -v nvidia-smi >/dev/null 2>&1; then nvidia-smi -L | grep -c '^GPU' || echo 0; else echo 8; fi
}
GPUS="${GPUS:-$(gpu_count)}" NNODES="${NNODES:-2}" NODE_RANK="${NODE_RANK:-0}"
MASTER_ADDR="${MASTER_ADDR:-127.0.0.1}" MASTER_PORT="${MASTER_PORT:-29500}" NPROC="${NPROC:-2}"
SAVE_DIR="${SAVE_DIR:-checkpoints/$FAMILY}"

# The training options of each family (task, model, criterion, optimisation).
hi_cmlm() {
  ARGS=(--task cmlm_hybrid --noise random_mask --arch hi_cmlm_transformer_wmt_en_de
    --hybrid-strategy fence_replace --criterion nat_loss --label-smoothing 0.1
    --optimizer adam --adam-betas '(0.9,0.98)' --lr 5e-4 --lr-scheduler inverse_sqrt
    --warmup-updates 10000 --max-tokens 8192 --max-update 300000)
}
prophetnet() {
  ARGS=(--task translation_prophetnet -s article -t title --arch prophetnet_large --ngram 2
    --criterion ngram_language_loss --label-smoothing 0.1 --optimizer adam --adam-betas '(0.9,0.999)'
    --lr 1e-4 --lr-scheduler inverse_sqrt --warmup-updates 1000 --max-tokens 1024 --max-update 30000)
}
posmask() {
  ARGS=(--task position_masked_lm --arch position_masked_roberta_base --criterion position_masked_lm
    --position-mask-prob 0.10 --tokens-per-sample 512 --sample-break-mode complete --batch-size 16
    --optimizer adam --adam-betas '(0.9,0.98)' --adam-eps 1e-6 --weight-decay 0.01 --clip-norm 0.0
    --lr 5e-4 --lr-scheduler polynomial_decay --warmup-updates 10000 --total-num-update 125000
    --max-update 125000)
}
unilm() {
  ARGS=(--task unilm_seq2seq -s article -t title --arch unilm_transformer_base --attention-mask prefix
    --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --optimizer adam --adam-betas '(0.9,0.98)'
    --lr 5e-5 --lr-scheduler inverse_sqrt --warmup-updates 1000 --max-tokens 4096 --max-update 20000)
  UNUSED_PARAMETERS=(--find-unused-parameters)
}
permutation_lm() {
  ARGS=(--task permutation_lm --arch unilm_transformer_base --attention-mask permutation
    --sample-break-mode none --tokens-per-sample 512 --criterion cross_entropy --optimizer adam
    --adam-betas '(0.9,0.98)' --lr 5e-4 --lr-scheduler inverse_sqrt --warmup-updates 4000
    --max-tokens 8192 --max-update 100000)
}
UNUSED_PARAMETERS=()
case "$FAMILY" in
  hi_cmlm|prophetnet|posmask|unilm|permutation_lm) "$FAMILY" ;;
  *) die "unknown family $FAMILY (hi_cmlm, prophetnet, posmask, unilm, permutation_lm)" ;;
esac

TRAIN=(fairseq-train "$DATA" --user-dir "$ROOT/fairseq_ext" "${ARGS[@]}" --save-dir "$SAVE_DIR"
  --log-format simple "$@")
# torchrun runs a Python file: fairseq-train's entry-point script
TRAIN_SCRIPT="$(command -v fairseq-train || echo fairseq-train)"

# show or run one command
go() { if [ "${DRY_RUN:-0}" = 1 ]; then printf '%q ' "$@" | sed 's/ $//'; echo; else "$@"; fi; }

case "$MODE" in
  gpus)
    DDP=(--ddp-backend "${DDP_BACKEND:-c10d}" "${UNUSED_PARAMETERS[@]}" --distributed-backend nccl)
    go "${TRAIN[@]}" "${DDP[@]}" --distributed-world-size "$GPUS" ;;
  torchrun)
    DDP=(--ddp-backend "${DDP_BACKEND:-c10d}" "${UNUSED_PARAMETERS[@]}" --distributed-backend nccl)
    go torchrun --standalone --nproc_per_node "$GPUS" "$TRAIN_SCRIPT" "${TRAIN[@]:1}" "${DDP[@]}" \
      --distributed-world-size "$GPUS" ;;
  multinode)
    DDP=(--ddp-backend "${DDP_BACKEND:-c10d}" "${UNUSED_PARAMETERS[@]}" --distributed-backend nccl)
    go "${TRAIN[@]}" "${DDP[@]}" --distributed-world-size "$((NNODES * GPUS))" \
      --distributed-init-method "tcp://$MASTER_ADDR:$MASTER_PORT" --distributed-rank "$((NODE_RANK * GPUS))" ;;
  torchrun-multinode)
    DDP=(--ddp-backend "${DDP_BACKEND:-c10d}" "${UNUSED_PARAMETERS[@]}" --distributed-backend nccl)
    go torchrun --nnodes "$NNODES" --nproc_per_node "$GPUS" --rdzv_backend c10d \
      --rdzv_endpoint "$MASTER_ADDR:$MASTER_PORT" --rdzv_id "fairseq_ext_$FAMILY" \
      "$TRAIN_SCRIPT" "${TRAIN[@]:1}" "${DDP[@]}" --distributed-world-size "$((NNODES * GPUS))" ;;
  cpu-gloo)
    DDP=(--cpu --ddp-backend legacy_ddp --distributed-backend gloo --distributed-world-size "$NPROC"
      --distributed-init-method "tcp://127.0.0.1:$MASTER_PORT" --distributed-no-spawn)
    if [ "${DRY_RUN:-0}" = 1 ]; then
      for rank in $(seq 0 $((NPROC - 1))); do go "${TRAIN[@]}" "${DDP[@]}" --distributed-rank "$rank"; done
    else
      pids=()
      for rank in $(seq 0 $((NPROC - 1))); do "${TRAIN[@]}" "${DDP[@]}" --distributed-rank "$rank" & pids+=($!); done
      status=0
      for pid in "${pids[@]}"; do wait "$pid" || status=1; done
      exit "$status"
    fi ;;
  *) die "unknown mode $MODE (gpus, torchrun, multinode, torchrun-multinode, cpu-gloo)" ;;
esac

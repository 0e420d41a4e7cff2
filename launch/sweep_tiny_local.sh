#!/usr/bin/env bash
# The sweep machinery on one machine, in a few minutes on a CPU: the tiny experiment with and without the
# Domino head x 2 seeds through submitit's local executor (background processes, same folders and W&B runs as
# on Slurm), then the report. WANDB_MODE=offline keeps the W&B runs on disk.
set -euo pipefail
cd "$(dirname "$0")/.."
SWEEP_ID=${SWEEP_ID:-tiny_local}

WANDB_MODE=${WANDB_MODE:-offline} python -m domino_train -m \
  hydra/launcher=submitit_local \
  sweep_id="$SWEEP_ID" \
  seed=0,1 \
  experiment=tiny \
  drafter.head=domino,null \
  logger=wandb \
  "$@"
domino-report "artifacts/runs/multirun/$SWEEP_ID" --out "artifacts/reports/$SWEEP_ID" --title "tiny: head vs no head"

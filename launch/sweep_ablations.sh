#!/usr/bin/env bash
# The paper's ablation grid as one Slurm sweep: Domino with the curriculum, no head (DFlash), training-time
# testing (TTT) and no curriculum, x 3 seeds = 12 jobs in one sbatch array, each on NODES x 8 GPUs.
#
#   launch/sweep_ablations.sh hydra.launcher.partition=gpu hydra.launcher.account=my-project
#   SWEEP_ID=qwen3_8b_ablations launch/sweep_ablations.sh ...   # rerun: resumes every unfinished job
#   domino-report artifacts/runs/multirun/qwen3_8b_ablations     # the comparison (or --wandb TEAM/domino)
#
# trainer=gpu and trainer.num_nodes stay outside the swept values: Hydra sizes the one sbatch array from the
# sweep's shared config (domino_train.run.slurm.SweepShapeCheck refuses a sweep whose jobs disagree with it).
# seed comes first: Hydra numbers the jobs seed-major, so appending seeds (seed=0,1,2,3) keeps the job
# numbers, folders and W&B runs of the jobs already there and adds new ones at the end.
# EXPERIMENTS and TRAINER replace the grid's experiments and trainer (the tests shrink it to the tiny one:
# EXPERIMENTS=tiny TRAINER=cpu SEEDS=0 launch/sweep_ablations.sh drafter.head=domino,null ...).
set -euo pipefail
cd "$(dirname "$0")/.."

python -m domino_train -m \
  hydra/launcher=submitit_slurm \
  sweep_id="${SWEEP_ID:-qwen3_8b_ablations}" \
  seed="${SEEDS:-0,1,2}" \
  experiment="${EXPERIMENTS:-qwen3_8b_curriculum,qwen3_8b_dflash,qwen3_8b_ttt,qwen3_8b_no_curriculum}" \
  trainer="${TRAINER:-gpu}" \
  trainer.num_nodes="${NODES:-1}" \
  hydra.launcher.timeout_min="${TIMEOUT_MIN:-1440}" \
  "$@"

"""A recording `sbatch` for the one thing a one-node test Slurm cannot show: a multi-node GPU sbatch script.

The real Slurm of the `slurm` tests (`tests/slurm_cluster.py`) runs every job that fits one CPU node
(`launch/train_multinode.sbatch`, requeues, submitit sweeps). It refuses what a GPU cluster would take: a
sweep on `trainer=gpu trainer.num_nodes=2` asks for 2 nodes x 8 GPUs, which no one-node CPU cluster has.
`install(bin_dir, state_dir)` writes an `sbatch` into `bin_dir` (put it first on PATH) that copies each
script it is given to `state_dir/scripts/<n>.sh`, runs nothing and fails: the tests read the #SBATCH lines
submitit wrote (nodes, tasks, GPUs, signal, array), and check that a refused sweep submitted nothing.
Beside it goes an `srun` that fails without running anything: submitit's Slurm executor refuses to start
unless `srun` is on PATH (`shutil.which`), so without it the fake cluster would need a real Slurm client
installed. Nothing should call it (the fake sbatch runs no script); if something does, it fails loudly.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

REFUSAL = "fake sbatch: script recorded, nothing run"
SRUN_REFUSAL = "fake srun: the fake cluster runs nothing"


def install(bin_dir: Path, state_dir: Path) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    state_dir.mkdir(parents=True, exist_ok=True)
    sbatch = f'exec {shlex.quote(sys.executable)} {shlex.quote(__file__)} {shlex.quote(str(state_dir))} "$@"'
    srun = f"echo {shlex.quote(f'srun: error: {SRUN_REFUSAL}')} >&2\nexit 1"
    for name, body in (("sbatch", sbatch), ("srun", srun)):
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)


def record(state_dir: Path, args: list[str]) -> int:
    scripts = state_dir / "scripts"
    scripts.mkdir(exist_ok=True)
    (scripts / f"{len(list(scripts.iterdir()))}.sh").write_text(Path(args[-1]).read_text())
    print(f"sbatch: error: {REFUSAL}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(record(Path(sys.argv[1]), sys.argv[2:]))

"""Slurm: one owner for preemption, and sweeps whose sbatch matches what each job trains on.

Preemption and time limits are handled by exactly one party:
- Hydra sweeps (`hydra/launcher=submitit_slurm`): submitit. Slurm sends submitit's signal (USR2 since
  submitit 1.5; `SUBMITIT_PREEMPT_SIGNAL` changes it) `signal_delay_s` before the time limit, or on
  `scancel --signal`; submitit re-pickles the job and `scontrol requeue`s it (time-outs at most
  `max_num_timeout` times). The requeued job runs in the same sweep subfolder, where `ckpt_path=auto`
  resumes from its `last.ckpt` and the W&B logger continues the same run id.
- `launch/train_multinode.sbatch` (no submitit): the batch script's USR1 trap runs `scontrol requeue`;
  the requeued job keeps its Slurm job id, hence its `run_id` (`slurm-<job id>`) and folder.
Under Slurm, Lightning would install its own requeue handler on USR1 (save an `hpc_ckpt`, then
`scontrol requeue` itself), a second owner next to the script's trap (and next to submitit where it is
configured on USR1). `cluster_plugins` hands the Trainer `SLURMEnvironment(auto_requeue=False)` whenever it
runs inside a Slurm job: Lightning still takes ranks, node list and port from Slurm, and never requeues.
On SIGTERM (preemption's first signal) Lightning still stops the fit; Slurm requeues preempted jobs itself
when the partition's PreemptMode is REQUEUE.

`SweepShapeCheck` (a Hydra callback, `hydra.callbacks` in conf/train.yaml) refuses, before anything is
submitted, a Slurm sweep whose jobs train on other nodes x tasks x GPUs than the one sbatch array asks for.
The launcher's counts interpolate the trainer (`tasks_per_node: ${trainer.devices}`), but Hydra resolves
them once, on the sweep's shared config, without the swept values: a sweep over experiments with another
trainer than the default would otherwise queue, then fail in every job (or hang, outside Lightning's check).
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

from hydra import compose
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from lightning.fabric.plugins.environments import SLURMEnvironment
from omegaconf import DictConfig

from domino_train.run.resolvers import gpus_per_node

# conf/hydra/launcher/submitit_{slurm,local}.yaml shadow the plugin's configs of the same name on purpose
# (the usual `hydra/launcher=submitit_slurm` gets the interpolated counts), and Hydra validates every knob
# against the plugin's schema; it warns that this automatic schema matching is deprecated.
warnings.filterwarnings("ignore", message=r"(?s).*'hydra/launcher/submitit_\w+' is validated against ConfigStore")


def cluster_plugins() -> list[Any]:
    """Trainer plugins for the cluster this process runs on: under Slurm, Slurm's ranks without Lightning's
    requeue handler; elsewhere none (Lightning detects torchrun, LSF, ... itself)."""
    return [SLURMEnvironment(auto_requeue=False)] if SLURMEnvironment.detect() else []


def job_shape(cfg: Any) -> tuple[int, int, int | None]:
    """(nodes, tasks per node, GPUs per node) that the job with config `cfg` trains on."""
    trainer = cfg.trainer
    return int(trainer.num_nodes), int(trainer.devices), gpus_per_node(trainer.accelerator, trainer.devices)


class SweepShapeCheck(Callback):
    """Hydra callback: a Slurm sweep whose jobs need another shape than its sbatch array is refused up front."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        launcher = config.hydra.launcher
        if not str(launcher.get("_target_", "")).endswith(".SlurmLauncher"):
            return
        gpus = launcher.get("gpus_per_node")  # null: GPUs come from gres / gpus_per_task, not compared
        asked = (int(launcher.nodes), int(launcher.tasks_per_node), int(gpus) if gpus is not None else None)
        for overrides in sweep_jobs(config):
            shape = job_shape(compose(config.hydra.job.config_name, overrides=overrides))
            if shape[:2] != asked[:2] or (gpus is not None and shape[2] != asked[2]):
                # SystemExit, not an exception: Hydra turns a callback's exceptions into warnings and goes on
                sys.exit(
                    f"sweep job ({' '.join(overrides)}) trains on nodes x devices x GPUs = {_fmt(shape)} but the "
                    f"sbatch array asks for {_fmt(asked)} (resolved without the swept values): set trainer (e.g. "
                    "trainer=gpu) and trainer.num_nodes outside the swept values, or sweep them in separate runs"
                )


def sweep_jobs(config: DictConfig) -> list[list[str]]:
    """The task overrides of every job of this multirun, as Hydra's basic sweeper expands them."""
    params = [f"{k}={v}" for k, v in (config.hydra.sweeper.get("params") or {}).items()]
    overrides = OverridesParser.create().parse_overrides([*params, *config.hydra.overrides.task])
    return [list(job) for batch in BasicSweeper.split_arguments(overrides, None) for job in batch]


def _fmt(shape: tuple[int, int, int | None]) -> str:
    return f"{shape[0]} x {shape[1]} x {shape[2] or 0}"

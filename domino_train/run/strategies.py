"""DeepSpeed on any machine: `deepspeed_strategy` (the `_target_` of `conf/strategy/deepspeed_stage_*.yaml`)
builds Lightning's `DeepSpeedStrategy` where CUDA is available and `CPUDeepSpeedStrategy` where it is not,
so `strategy=deepspeed_stage_2` is one override on a GPU node and on a laptop alike (and a `trainer=cpu` run
gets the CPU strategy on a GPU node too).

Lightning's `DeepSpeedStrategy` refuses non-CUDA accelerators, validates CUDA device indices, and hands
DeepSpeed the CUDA device index; on a CPU there is none. This subclass lifts exactly those three
CUDA assumptions (DeepSpeed itself falls back to its CPU accelerator and a gloo process group) and
launches its processes with `spawn`, which works inside pytest (the plain subprocess launcher re-runs
the whole pytest command in each child), unless Slurm or torchrun started them already. On GPUs use
Lightning's own `DeepSpeedStrategy`.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import torch
from lightning.fabric.utilities.seed import reset_seed
from lightning.pytorch.strategies import DDPStrategy, DeepSpeedStrategy
from lightning.pytorch.strategies.launchers.multiprocessing import _MultiProcessingLauncher

log = logging.getLogger(__name__)


class _SpawnWithoutWeightTransfer(_MultiProcessingLauncher):
    """Spawned workers export and checkpoint the drafter themselves; under ZeRO-3 rank 0's state_dict
    holds only its shard, so the weights are not loaded back into the main process."""

    def _recover_results_in_main_process(self, worker_output, trainer) -> None:
        if worker_output.weights_path is not None:
            os.remove(worker_output.weights_path)
        super()._recover_results_in_main_process(worker_output._replace(weights_path=None), trainer)


class CPUDeepSpeedStrategy(DeepSpeedStrategy):
    strategy_name = "deepspeed_cpu"

    def __init__(self, *args, **kwargs) -> None:
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
        kwargs.setdefault("process_group_backend", "gloo")
        super().__init__(*args, **kwargs)

    @property
    def root_device(self) -> torch.device:
        return torch.device("cpu", self.local_rank)  # DeepSpeed wants a device index, even on a CPU

    def setup_environment(self) -> None:
        DDPStrategy.setup_environment(self)  # skips DeepSpeedStrategy's "CUDA only" check

    def setup_distributed(self) -> None:
        reset_seed()  # as DeepSpeedStrategy, minus its CUDA device-index validation
        self.set_world_ranks()
        _skip_shm_comm_build()
        self._init_deepspeed_distributed()

    def _configure_launcher(self) -> None:
        if self.cluster_environment is not None and self.cluster_environment.creates_processes_externally:
            return  # Slurm (srun) or torchrun started one process per device: spawning more would double them
        self._launcher = _SpawnWithoutWeightTransfer(self, start_method="spawn")


def _skip_shm_comm_build() -> None:
    """DeepSpeed's CPU backend JIT-compiles a shared-memory all-reduce kernel (C++, into the user's
    ~/.cache/torch_extensions) as its process group starts, though only `inference_all_reduce` uses it, never
    training. Marked incompatible, it is not built: no compile per process (minutes on a busy machine), and
    no stale lock file from a killed compile, on which every later run would wait forever."""
    import deepspeed.ops

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False


def deepspeed_strategy(accelerator: str | None = None, **kwargs: Any) -> DeepSpeedStrategy:
    """Lightning's `DeepSpeedStrategy(**kwargs)` on CUDA, else `CPUDeepSpeedStrategy(**kwargs)` (gloo, spawn).

    `accelerator` is the trainer's (the strategy configs pass `${..accelerator}`): a `cpu` trainer gets the
    CPU strategy even on a machine with GPUs, where Lightning's own would refuse it."""
    if torch.cuda.is_available() and accelerator != "cpu":
        return DeepSpeedStrategy(**kwargs)
    why = "a cpu trainer" if accelerator == "cpu" else "no CUDA device"
    log.warning("%s: DeepSpeed ZeRO-%s runs on the CPU (gloo process group)", why, kwargs.get("stage"))
    return CPUDeepSpeedStrategy(**kwargs)

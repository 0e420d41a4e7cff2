"""OmegaConf resolvers used by `conf/` (registered when `domino_train` is imported).

- `${domino.run_id:}`: the default run name. Inside a Slurm job it is `slurm-<job id>` (`slurm-<array>_<task>`
  for array jobs), so every rank of a multi-node job and every requeue of it agree on one run directory;
  elsewhere it is the launch time. Hydra's `${now:}` differs between ranks started a second apart and
  between a job and its requeue, which splits one run into several directories.
- `${domino.run_key:${paths.output_dir},${paths.log_dir}}`: an id derived from the run directory (its path
  under the log dir), usable as a W&B run id: a requeued or resubmitted job writing to the same directory
  continues the same W&B run, and two jobs of a sweep (two directories) never share one.
- `${domino.gpus_per_node:${trainer.accelerator},${trainer.devices}}`: GPUs to ask Slurm for on each node:
  the devices of a GPU trainer, null (no `--gpus-per-node`) on a CPU one.
- `${domino.tags:${tags}}`: W&B tags derived from the run (`variant_tags`) followed by the extra `tags`.
- `${domino.data_target:${hydra:runtime.choices.target},${target.spec}}`: the target's part of a data set's
  folder name: the target config's name, or for a local folder target (`target.spec=/models/x`) the
  folder's name and a hash of its absolute path, so two folder targets never share a data set.
- `${domino.cwd:}`: the launch folder: Hydra's `runtime.cwd` where Hydra has set it, else the working
  directory. `${hydra:runtime.cwd}` itself fails in the process that submits a multirun, where the sweep
  folder (and so the paths) must already resolve.
"""

from __future__ import annotations

import hashlib
import os
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from domino_train.run.variant import variant_tags

_LAUNCH_TIME = datetime.now().strftime("%Y-%m-%d_%H-%M-%S")  # one value per process, like Hydra's cached ${now:}
_MAX_ID = 64
_NOT_IN_ID = re.compile(r"[^A-Za-z0-9_.=+-]+")  # W&B refuses : ; , # ? / ' in run ids


def slurm_job_id() -> str | None:
    """This process's Slurm job (`<array job>_<task>` for array tasks), or None outside a batch job.

    Interactive allocations (job name `bash` / `interactive`, Lightning's rule) do not count: every command
    typed in one would otherwise share a run directory.
    """
    if "SLURM_JOB_ID" not in os.environ or os.environ.get("SLURM_JOB_NAME") in ("bash", "interactive"):
        return None
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return f"{array}_{task}" if array and task else os.environ["SLURM_JOB_ID"]


def default_run_id() -> str:
    job = slurm_job_id()
    return f"slurm-{job}" if job else _LAUNCH_TIME


def run_key(output_dir: str, log_dir: str) -> str:
    """`output_dir` relative to `log_dir` (absolute when outside it) as a W&B-safe id of at most 64 chars."""
    out, logs = Path(output_dir).absolute(), Path(log_dir).absolute()
    rel = out.relative_to(logs) if out.is_relative_to(logs) else out
    key = _NOT_IN_ID.sub("-", str(rel)).strip("-.") or "run"
    if len(key) > _MAX_ID:  # keep the informative tail, and a hash of the whole path for uniqueness
        key = key[-(_MAX_ID - 9) :].lstrip("-") + "-" + hashlib.sha1(str(out).encode()).hexdigest()[:8]
    return key


def gpus_per_node(accelerator: str, devices: Any) -> int | None:
    return int(devices) if str(accelerator) in ("gpu", "cuda") else None


def run_tags(extra: Any, *, _root_: Any) -> list[str]:
    derived = variant_tags(_root_)
    return derived + [str(t) for t in (extra or []) if str(t) not in derived]


def data_target(choice: str, spec: str | None) -> str:
    """The target config's name `choice`, or for a local folder `spec` its name and a hash of its path."""
    from inference.targets.loader import BUILTIN_SPECS  # here: registering the resolvers needs no torch

    if not spec or spec in BUILTIN_SPECS or not Path(spec).expanduser().is_dir():
        return choice
    folder = Path(spec).expanduser().resolve()
    return f"{_NOT_IN_ID.sub('-', folder.name)}-{hashlib.sha1(str(folder).encode()).hexdigest()[:8]}"


def launch_dir() -> str:
    from hydra.core.hydra_config import HydraConfig

    return HydraConfig.get().runtime.cwd if HydraConfig.initialized() else os.getcwd()


def register() -> None:
    """Register the resolvers (idempotent: replaces earlier registrations)."""
    OmegaConf.register_new_resolver("domino.run_id", default_run_id, replace=True)
    OmegaConf.register_new_resolver("domino.run_key", run_key, replace=True)
    OmegaConf.register_new_resolver("domino.gpus_per_node", gpus_per_node, replace=True)
    OmegaConf.register_new_resolver("domino.tags", run_tags, replace=True)
    OmegaConf.register_new_resolver("domino.data_target", data_target, replace=True)
    OmegaConf.register_new_resolver("domino.cwd", launch_dir, replace=True)

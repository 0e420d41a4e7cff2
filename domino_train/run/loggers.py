"""Lightning loggers that survive resumption and feed the ablation dashboards.

- `ResumableCSVLogger`: Lightning's CSV logger deletes `metrics.csv` when its folder is not empty, so a
  requeued run would lose every row logged before the requeue. This one appends to the file (rows of the
  steps replayed after a resume appear twice; readers keep the last row per step).
- `AblationWandbLogger`: the W&B run's config is the resolved run configuration at the top level
  (`train.causal_input`, `drafter.head`, `seed`, ... as dashboard columns) plus the drafter's `config.json`,
  and best-of summaries (`val/tau_final` max, CE min) replace last-value summaries, so run tables show the
  best validation rather than the last one.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from typing import Any

from lightning.fabric.loggers.logger import rank_zero_experiment
from lightning.fabric.utilities.logger import _convert_params
from lightning.pytorch.loggers import CSVLogger, WandbLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter
from lightning.pytorch.utilities.rank_zero import rank_zero_only


class _AppendingWriter(ExperimentWriter):
    def _check_log_dir_exists(self) -> None:
        # Lightning removes metrics.csv here; keep it and continue its columns instead.
        if self._fs.isfile(self.metrics_file_path):
            with self._fs.open(self.metrics_file_path, "r", newline="") as f:
                self.metrics_keys = next(csv.reader(f), [])


class ResumableCSVLogger(CSVLogger):
    """`CSVLogger` that appends to an existing `metrics.csv` (a resumed run keeps its history)."""

    @property
    @rank_zero_experiment
    def experiment(self) -> ExperimentWriter:
        if self._experiment is None:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = _AppendingWriter(log_dir=self.log_dir)
        return self._experiment


class AblationWandbLogger(WandbLogger):
    """`WandbLogger` with the run config at the top level and best-of summaries.

    Args:
        summaries: metric name -> W&B summary (`max`, `min`, `last`, `mean`), e.g. `{"val/tau_final": "max"}`.
        **kwargs: `WandbLogger` / `wandb.init` arguments (project, group, job_type, tags, id, resume, ...).
    """

    def __init__(self, summaries: Mapping[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._summaries = dict(summaries or {})

    @property
    @rank_zero_experiment
    def experiment(self) -> Any:
        created = self._experiment is None
        run = super().experiment
        if created and callable(getattr(run, "define_metric", None)):
            for name, summary in self._summaries.items():
                run.define_metric(name, summary=summary, step_metric="trainer/global_step")
        return run

    @rank_zero_only
    def log_hyperparams(self, params: Any) -> None:
        params = _convert_params(params)
        run_config = params.get("run_config")
        if isinstance(run_config, Mapping):  # DominoLitModule's hparams: the resolved run config + config.json
            params = {**run_config, "drafter_config": params.get("drafter_config")}
        super().log_hyperparams(params)

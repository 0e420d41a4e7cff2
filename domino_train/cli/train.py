"""`domino-train` (or `python -m domino_train experiment=...`): compose `conf/train.yaml`, fit a drafter."""

from __future__ import annotations

import sys
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from domino_train import CONF_DIR
from domino_train.run.input_errors import INPUT_ERRORS
from domino_train.run.train import train
from inference.cli.config_keys import refuse_unknown_keys
from inference.cli.errors import one_line_errors
from inference.cli.target_folder import target_folder_overrides


def resume_override(cfg: DictConfig) -> tuple[str, Any]:
    """The override that resumes this run where it stopped: its `run_id`, or in a sweep (`-m`) its `sweep_id`."""
    if HydraConfig.get().mode == RunMode.MULTIRUN:
        return "sweep_id", cfg.sweep_id
    return "run_id", cfg.run_id


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="train")
@one_line_errors("domino-train", extra=INPUT_ERRORS, resume=resume_override)
def _train(cfg: DictConfig) -> float | None:
    metrics = train(cfg)
    return metrics.get("val/tau_final")


def main() -> None:
    """The `domino-train` console script: unknown config keys are refused before anything runs."""
    sys.argv[1:] = target_folder_overrides("domino-train", CONF_DIR, sys.argv[1:])  # before Hydra reads them
    refuse_unknown_keys("domino-train", CONF_DIR, "train", sys.argv[1:])
    _train()


if __name__ == "__main__":
    main()

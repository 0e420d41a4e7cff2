"""`domino-train` (or `python -m domino_train experiment=...`): compose `conf/train.yaml`, fit a drafter."""

from __future__ import annotations

import sys

import hydra
from lightning.fabric.utilities.exceptions import MisconfigurationException
from omegaconf import DictConfig

from domino_train import CONF_DIR
from domino_train.run.train import train
from inference.cli.config_keys import refuse_unknown_keys
from inference.cli.errors import one_line_errors
from inference.cli.target_folder import target_folder_overrides


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="train")
@one_line_errors("domino-train", extra=(MisconfigurationException,))
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

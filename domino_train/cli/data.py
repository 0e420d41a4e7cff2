"""`domino-data` (or `python -m domino_train.data`): run the data stages chosen by `stages=[...]`."""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from domino_train import CONF_DIR
from domino_train.data.pipeline import run
from inference.cli.config_keys import refuse_unknown_keys
from inference.cli.errors import one_line_errors
from inference.cli.target_folder import target_folder_overrides


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="data_pipeline")
@one_line_errors("domino-data")
def _data(cfg: DictConfig) -> None:
    run(cfg)


def main() -> None:
    """The `domino-data` console script: unknown config keys are refused before anything runs."""
    sys.argv[1:] = target_folder_overrides("domino-data", CONF_DIR, sys.argv[1:])  # before Hydra reads them
    refuse_unknown_keys("domino-data", CONF_DIR, "data_pipeline", sys.argv[1:])
    _data()


if __name__ == "__main__":
    main()

"""`domino-data` (or `python -m domino_train.data`): run the data stages chosen by `stages=[...]`."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from domino_train import CONF_DIR
from domino_train.data.pipeline import run
from inference.cli.errors import one_line_errors


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="data_pipeline")
@one_line_errors("domino-data")
def main(cfg: DictConfig) -> None:
    run(cfg)


if __name__ == "__main__":
    main()

"""`domino-data` (or `python -m domino_train.data`): run the data stages chosen by `stages=[...]`."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from domino_train import CONF_DIR
from domino_train.data.pipeline import run


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="data_pipeline")
def main(cfg: DictConfig) -> None:
    try:
        run(cfg)
    except (FileNotFoundError, ValueError) as e:  # bad input: one line that names the problem, no traceback
        raise SystemExit(f"domino-data: {e}") from None


if __name__ == "__main__":
    main()

"""`domino-train` (or `python -m domino_train experiment=...`): compose `conf/train.yaml`, fit a drafter."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from domino_train import CONF_DIR
from domino_train.train import train


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="train")
def main(cfg: DictConfig) -> float | None:
    metrics = train(cfg)
    return metrics.get("val/tau_final")


if __name__ == "__main__":
    main()

"""`python -m domino_train experiment=...`: compose the run from `conf/train.yaml` and fit a drafter."""

from __future__ import annotations

import warnings
from typing import Any

import hydra
import lightning as L
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from domino_train import CONF_DIR
from domino_train.module import DominoLitModule
from inference.config import DrafterConfig
from inference.target import TargetModel


def drafter_config(cfg: DictConfig, target: TargetModel) -> DrafterConfig:
    """The drafter for this target: `cfg.drafter` over the target's HF config (weights not needed)."""
    make = instantiate(cfg.drafter)
    mask = cfg.drafter.mask_token_id if cfg.drafter.mask_token_id is not None else target.mask_token_id
    return make(target.config, mask_token_id=mask)


def build(cfg: DictConfig) -> tuple[DominoLitModule, L.LightningDataModule, L.Trainer]:
    """Everything `train` fits, built from the config (the target's weights are loaded later, in setup)."""
    L.seed_everything(cfg.seed, workers=True)
    target_factory = instantiate(cfg.target, _partial_=True)
    config = drafter_config(cfg, target_factory(device="meta"))
    datamodule = instantiate(cfg.data)
    module = DominoLitModule(
        drafter_config=config.to_hf_dict(),
        target=target_factory,
        seed=cfg.seed,
        run_config=OmegaConf.to_container(cfg, resolve=True),
        **OmegaConf.to_container(cfg.train, resolve=True),
    )
    callbacks = [instantiate(c) for c in (cfg.get("callbacks") or {}).values() if c is not None]
    loggers = [instantiate(c) for c in (cfg.get("logger") or {}).values() if c is not None]
    trainer = instantiate(cfg.trainer)(callbacks=callbacks, logger=loggers or False)
    return module, datamodule, trainer


# The data modules restore the position inside an epoch themselves (their state_dict), which Lightning's
# check for resumable dataloaders does not see.
warnings.filterwarnings("ignore", message=".*resuming from a checkpoint that ended before the epoch ended.*")


def train(cfg: DictConfig) -> dict[str, Any]:
    """Fit (or resume with `ckpt_path`), export, and return the final metrics."""
    module, datamodule, trainer = build(cfg)
    try:
        trainer.fit(module, datamodule=datamodule, ckpt_path=cfg.ckpt_path)
    finally:
        for logger in trainer.loggers:
            finish = getattr(getattr(logger, "experiment", None), "finish", None)
            if callable(finish) and type(logger).__name__ == "WandbLogger":
                finish()  # one W&B run per job, even in multiruns and after a crash
    return {k: float(v) for k, v in trainer.callback_metrics.items() if v.numel() == 1}


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="train")
def main(cfg: DictConfig) -> float | None:
    metrics = train(cfg)
    return metrics.get("val/tau_final")


if __name__ == "__main__":
    main()

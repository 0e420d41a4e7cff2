"""Hydra `_target_` paths that moved, and the current path of each.

Run folders (`.hydra/config.yaml`, `run_identity.json`, `csv/hparams.yaml`) and exported
`training_config.yaml` files record the `_target_` paths of the code that started them. Those records must
keep resuming and instantiating after a move, so a moved path is mapped here, in one place, instead of
being kept importable at its old address (a module per old path would keep the old layout alive).
`current_target` is applied wherever a recorded config is used: when a run is built (`run.train.build`)
and when recipes are compared (`run.variant.variant_config`, which the resume guard and the report use).
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, ListConfig

MOVED_TARGETS = {
    # domino_train/data_module.py was split into data/ (issue 23)
    "domino_train.data_module.TokenizedDataModule": "domino_train.data.tokenized_module.TokenizedDataModule",
    "domino_train.data_module.SyntheticDataModule": "domino_train.data.synthetic_module.SyntheticDataModule",
    # run plumbing moved from domino_train/ into domino_train/run/ (issue 23)
    "domino_train.callbacks.TokensPerSecond": "domino_train.run.callbacks.TokensPerSecond",
    "domino_train.callbacks.RedoDueValidation": "domino_train.run.callbacks.RedoDueValidation",
    "domino_train.callbacks.ExportDrafter": "domino_train.run.callbacks.ExportDrafter",
    "domino_train.loggers.ResumableCSVLogger": "domino_train.run.loggers.ResumableCSVLogger",
    "domino_train.loggers.AblationWandbLogger": "domino_train.run.loggers.AblationWandbLogger",
    "domino_train.strategies.deepspeed_strategy": "domino_train.run.strategies.deepspeed_strategy",
    "domino_train.slurm.SweepShapeCheck": "domino_train.run.slurm.SweepShapeCheck",
}


def current_target(path: Any) -> Any:
    """The current path of a `_target_` value (unchanged when it did not move, or is not a string)."""
    return MOVED_TARGETS.get(path, path) if isinstance(path, str) else path


def upgrade_targets(cfg: DictConfig | ListConfig) -> None:
    """Rewrite every moved `_target_` in `cfg` (nested, in place) to its current path."""
    nodes = cfg.values() if isinstance(cfg, DictConfig) else cfg
    if isinstance(cfg, DictConfig) and "_target_" in cfg:
        cfg._target_ = current_target(cfg._target_)
    for node in nodes:
        if isinstance(node, DictConfig | ListConfig):
            upgrade_targets(node)

"""Training fixtures: compose `conf/train.yaml` the way `python -m domino_train` does."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import open_dict

from domino_train import CONF_DIR


def _compose_train(overrides: list[str], run_dir: Path | None = None):
    """The run config for `overrides`; `run_dir` replaces the Hydra run folder (paths.output_dir)."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(CONF_DIR, version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    if run_dir is not None:
        with open_dict(cfg):
            cfg.paths.root_dir = str(run_dir)
            if not any(o.startswith("paths.output_dir=") for o in overrides):
                cfg.paths.output_dir = str(run_dir / "run")
    return cfg


TINY_FAST = [
    "experiment=tiny",
    "logger=none",
    "trainer.enable_progress_bar=false",  # drops the progress-bar callback too
    "trainer.enable_model_summary=false",
]


@pytest.fixture(scope="session")
def tiny_overrides() -> list[str]:
    """The command-line overrides of `tiny_cfg` (for tests that run `domino-train` itself)."""
    return list(TINY_FAST)


@pytest.fixture(scope="session")
def compose_train():
    """`compose_train(overrides, run_dir=None)` -> the composed run config."""
    return _compose_train


@pytest.fixture
def tiny_cfg(tmp_path):
    """`tiny_cfg(*overrides)`: experiment=tiny, quiet, writing under tmp_path."""

    def make(*overrides: str):
        return _compose_train([*TINY_FAST, *overrides], tmp_path)

    return make

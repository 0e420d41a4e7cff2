"""Domino training: Lightning + Hydra on top of `inference` (never the other way round)."""

from pathlib import Path

from domino_train import resolvers

CONF_DIR = str(Path(__file__).resolve().parents[1] / "conf")  # the Hydra config tree of this checkout
resolvers.register()  # before any config of the tree is composed

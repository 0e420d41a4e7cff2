"""Domino training: Lightning + Hydra on top of `inference` (never the other way round)."""

from domino_conf import CONF_DIR
from domino_train.run import resolvers

__all__ = ["CONF_DIR"]
resolvers.register()  # before any config of the tree is composed

"""The Hydra config tree, installed as the package `domino_conf` so a wheel carries it.

In a checkout this folder is `conf/` (pyproject maps the package onto it); installed from a wheel it is
`site-packages/domino_conf/`. Every console script composes from `CONF_DIR`, and a user's own config
folder layers on top with Hydra's `--config-dir` or `hydra.searchpath`.
"""

from pathlib import Path

CONF_DIR = str(Path(__file__).resolve().parent)

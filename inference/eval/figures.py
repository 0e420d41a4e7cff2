"""Matplotlib for files only: every plot of domino-decode and domino-report is drawn and saved through here."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def pyplot() -> Any | None:
    """`matplotlib.pyplot` on the file-only Agg backend, or None (with a warning) when not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed: no plot written (pip install matplotlib)")
        return None
    return plt


def save(fig: Any, path: Path, dpi: int = 120) -> Path:
    """Lay out, write and close `fig`."""
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path

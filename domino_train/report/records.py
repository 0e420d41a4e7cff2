"""One training run as the report sees it, whatever it was read from (run folder, offline or online W&B)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ReportError(ValueError):
    """Bad report input; the message names the problem and the fix in one line."""


Curve = list[tuple[int, float]]  # (optimizer step, value), sorted by step, one value per step


@dataclass
class RunRecord:
    """A run's resolved config, its metric curves and where it came from.

    `config` is the nested resolved run configuration (`task_name`, `seed`, `drafter`, `train`, ...);
    `curves` maps metric names (`train/loss`, `val/tau_final`, `val/acc_final/pos03`, ...) to curves.
    """

    key: str  # the run's id (its W&B id, or its folder)
    source: str  # folder or URL it was read from
    config: dict[str, Any]
    curves: dict[str, Curve] = field(default_factory=dict)
    export_dir: Path | None = None  # the exported drafter, when read from a run folder
    eval: dict[str, dict[str, float | None]] = field(default_factory=dict)  # method -> {tau, speedup}
    state: str | None = None  # the last attempt's status.json state (None: not recorded)
    log: str | None = None  # that attempt's log, where the launcher wrote one (submitit)

    @property
    def finished(self) -> bool:
        """Trained to the end (or from before status files): only these enter the table."""
        return self.state in (None, "COMPLETED")

    @property
    def has_head(self) -> bool:
        return (self.config.get("drafter") or {}).get("head") is not None

    def best(self, metric: str, mode: str) -> float | None:
        values = [v for _, v in self.curves.get(metric, [])]
        return (max if mode == "max" else min)(values) if values else None

    def last_step(self) -> int | None:
        steps = [s for curve in self.curves.values() for s, _ in curve]
        return max(steps) if steps else None

    def by_position(self, prefix: str) -> list[float]:
        """`<prefix>/posNN` at the last step where it was logged, in position order (e.g. val/acc_final)."""
        names = sorted(k for k in self.curves if k.startswith(prefix + "/pos"))
        return [self.curves[k][-1][1] for k in names]


def curves_from_rows(rows: Iterable[Mapping[str, Any]], step_key: str) -> dict[str, Curve]:
    """Metric curves from logged rows (CSV rows or W&B history rows).

    Rows without `step_key` or with non-numeric values are skipped; when a step was logged twice (the steps
    replayed after resuming from an older checkpoint), the later value wins.
    """
    points: dict[str, dict[int, float]] = {}
    for row in rows:
        step = _number(row.get(step_key))
        if step is None:
            continue
        for name, raw in row.items():
            value = _number(raw)
            if name in (step_key, "epoch", "_step", "_runtime", "_timestamp") or value is None:
                continue
            points.setdefault(name, {})[int(step)] = value
    return {name: sorted(steps.items()) for name, steps in points.items()}


def _number(raw: Any) -> float | None:
    if raw is None or raw == "" or isinstance(raw, bool | dict | list):
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None

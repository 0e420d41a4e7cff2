"""The scalars a run reports: its last logged metrics and its optimizer step.

The module checkpoints them (`checkpoint["metrics"]`) and the end-of-fit export puts them on the model
card, so a card made from a checkpoint and one made when fit ends say the same."""

from __future__ import annotations

from typing import Any


def run_metrics(trainer: Any) -> dict[str, float]:
    """The run's last logged scalar metrics and its optimizer step (`step`), as floats."""
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if v.numel() == 1}
    metrics["step"] = float(trainer.global_step)
    return metrics

"""The report's PNGs: training curves per variant, and acceptance by block position."""

from __future__ import annotations

import bisect
from pathlib import Path

from domino_train.report.records import ReportError, RunRecord
from domino_train.report.variants import Variant
from inference.eval.figures import pyplot, save

CURVES = (("train/loss", "training loss"), ("train/lambda", "lambda (weight of CE base)"), ("val/tau_final", "val tau"))
# x-axes of the curves: optimizer steps, anchor blocks trained on, or minutes of training step time
X_AXES = {"step": (None, 1.0, "optimizer step"), "blocks": ("train/blocks_seen", 1.0, "anchor blocks seen")}
X_AXES["minutes"] = ("train/seconds", 1 / 60, "training minutes (train/seconds)")


def x_values(run: RunRecord, steps: list[int], axis: str) -> list[float] | None:
    """`steps` of `run` on `axis`: the counter logged at the latest training step <= each step (validation
    runs after its step's training). None when the run never logged the counter (an older run)."""
    metric, scale, _ = X_AXES[axis]
    if metric is None:
        return [float(s) for s in steps]
    counter = run.curves.get(metric)
    if not counter:
        return None
    logged = [s for s, _ in counter]
    return [counter[max(bisect.bisect_right(logged, s) - 1, 0)][1] * scale for s in steps]


def _pyplot():
    plt = pyplot()
    if plt is None:
        raise ReportError("domino-report draws its plots with matplotlib: pip install matplotlib")
    return plt


def plot_curves(variants: list[Variant], path: Path, x: str = "step") -> Path:
    """Loss, lambda and validation tau against `x` (a key of `X_AXES`); one colour per variant, one line
    per seed."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(CURVES), figsize=(5 * len(CURVES), 3.6))
    for color, v in zip(plt.rcParams["axes.prop_cycle"].by_key()["color"] * 10, variants, strict=False):
        for i, run in enumerate(v.runs):
            for ax, (metric, _) in zip(axes, CURVES, strict=True):
                curve = run.curves.get(metric)
                xs = x_values(run, [s for s, _ in curve], x) if curve else None
                if xs:
                    values = [v for _, v in curve]
                    marker = "o" if len(curve) <= 30 else None  # validations are few: show each one
                    ax.plot(
                        xs,
                        values,
                        color=color,
                        alpha=0.85,
                        marker=marker,
                        markersize=3,
                        label=v.label if i == 0 else None,
                    )
    for ax, (_, title) in zip(axes, CURVES, strict=True):
        ax.set(title=title, xlabel=X_AXES[x][2])
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    return save(fig, path, dpi=90)


def plot_by_position(variants: list[Variant], path: Path) -> Path:
    """Greedy accuracy of each block position at the last validation (final logits solid, base dashed),
    mean over seeds: where along the block each variant's drafts stop matching."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for color, v in zip(plt.rcParams["axes.prop_cycle"].by_key()["color"] * 10, variants, strict=False):
        heads = any(r.has_head for r in v.runs)  # without a head, final logits are the base logits
        for prefix, style in (("val/acc_final", "-"), ("val/acc_base", "--"))[0 if heads else 1 :]:
            per_run = [r.by_position(prefix) for r in v.runs]
            per_run = [p for p in per_run if p]
            if not per_run:
                continue
            n = min(len(p) for p in per_run)
            mean = [sum(p[k] for p in per_run) / len(per_run) for k in range(n)]
            label = f"{v.label} ({prefix.split('_')[-1]})"
            ax.plot(range(1, n + 1), mean, style, color=color, marker="o", markersize=3, label=label)
    ax.set(title="validation accuracy by block position", xlabel="draft position k", ylabel="greedy accuracy")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return save(fig, path, dpi=90)


def plot_predicted_vs_realised(results: list[tuple[str, dict]], path: Path) -> Path | None:
    """Tokens per round a cost-aware decoder expected (calibrated acceptance) against what verification
    committed, one point per results.json, dataset and method; None when no run logged predictions."""
    points = [
        (f"{name}: {d}/{m}", s["predicted_tokens_per_round"], s["realised_tokens_per_round"])
        for name, data in results
        for d, by_method in data.get("results", {}).items()
        for m, s in by_method.items()
        if s.get("predicted_tokens_per_round") is not None
    ]
    if not points:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 4.2))
    top = max(max(p, r) for _, p, r in points) * 1.1
    ax.plot([1, top], [1, top], color="grey", linewidth=0.8, label="predicted = realised")
    ax.fill_between([1, top], [0.9, 0.9 * top], [1.1, 1.1 * top], color="grey", alpha=0.15, label="within 10 %")
    for label, predicted, realised in points:
        ax.plot([predicted], [realised], "o", label=label)
    ax.set(title="tokens per round", xlabel="predicted", ylabel="realised", xlim=(1, top), ylim=(1, top))
    ax.legend(fontsize=6)
    return save(fig, path, dpi=90)

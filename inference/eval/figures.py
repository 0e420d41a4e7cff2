"""Matplotlib for files only: every plot of domino-decode and domino-report is drawn and saved through here,
and domino-decode's own figures (plot.png, costs.png)."""

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


def write_plot(path: Path, results: dict[str, dict[str, dict[str, Any]]], methods: list[str]) -> bool:
    """Acceptance-length histograms per dataset and method, and a speedup bar chart, from `results`
    (`inference.eval.results.summarize`) with `methods` in table order; False without matplotlib."""
    plt = pyplot()
    if plt is None:
        return False
    datasets = list(results)
    colors = {m: f"C{i}" for i, m in enumerate(methods)}  # one colour per method in every panel
    speculative = [m for m in methods if m != "ar"]
    fig, axes = plt.subplots(1, len(datasets) + 1, figsize=(4.5 * (len(datasets) + 1), 3.6), squeeze=False)
    width = 0.8 / max(len(speculative), 1)
    for ax, d in zip(axes[0], datasets, strict=False):
        longest = 1
        for i, m in enumerate(speculative):
            hist = (results[d].get(m, {}).get("accept_length_histogram") or [0])[1:]  # lengths 1, 2, ...
            if sum(hist):
                offset = (i - (len(speculative) - 1) / 2) * width
                xs = [n + offset for n in range(1, len(hist) + 1)]
                ax.bar(xs, [c / sum(hist) for c in hist], width, label=m, color=colors[m])
                longest = max(longest, len(hist))
        ax.set_xticks(range(1, longest + 1))
        ax.set_xlim(0.4, longest + 0.6)
        ax.set(title=f"{d}: tokens per round", xlabel="accepted + bonus", ylabel="fraction of rounds")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    ax = axes[0][-1]
    width = 0.8 / max(len(methods), 1)
    for i, m in enumerate(methods):
        offset = (i - (len(methods) - 1) / 2) * width
        ys = [results[d].get(m, {}).get("speedup") or 0.0 for d in datasets]
        ax.bar([x + offset for x in range(len(datasets))], ys, width, label=m, color=colors[m])
    ax.set_xticks(range(len(datasets)), datasets)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set(title="speedup over ar", ylabel="x")
    ax.legend(fontsize=8)
    save(fig, path)
    return True


def write_cost_plot(path: Path, cost_model: dict[str, dict[str, Any]]) -> bool:
    """The measured verify curve of each cost-aware method and its draft cost per round; False without
    matplotlib."""
    plt = pyplot()
    if plt is None:
        return False
    fig, ax = plt.subplots(figsize=(5, 3.6))
    for i, (method, costs) in enumerate(cost_model.items()):
        curve = costs["verify_curve"]
        label = f"{method}: verify after {curve['prompt_tokens']}"
        ax.plot(curve["windows"], [1e3 * s for s in curve["seconds"]], "o-", color=f"C{i}", label=label)
        if curve.get("far_seconds"):  # the same windows after a longer context (`FAR_CONTEXT` more tokens)
            label = f"{method}: verify after {curve['far_tokens']}"
            ax.plot(curve["windows"], [1e3 * s for s in curve["far_seconds"]], "o:", color=f"C{i}", label=label)
        ax.axhline(1e3 * costs["draft_fixed_s"], color=f"C{i}", linestyle="--", label=f"{method}: draft per round")
    ax.set(title="measured round costs", xlabel="verified tokens (window)", ylabel="ms")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    save(fig, path)
    return True


def write_concurrency_plot(path: Path, levels: dict[str, dict[str, dict[int, dict[str, Any]]]]) -> bool:
    """Throughput against concurrency, one line per method, one panel per dataset
    (`inference.eval.concurrency.by_concurrency`); False without matplotlib."""
    plt = pyplot()
    if plt is None:
        return False
    fig, axes = plt.subplots(1, len(levels), figsize=(4.5 * len(levels), 3.6), squeeze=False)
    methods = list(dict.fromkeys(m for by_method in levels.values() for m in by_method))
    for ax, (dataset, by_method) in zip(axes[0], levels.items(), strict=True):
        for m, by_level in by_method.items():
            xs = sorted(by_level)
            ys = [by_level[n]["throughput_tok_s"] or 0.0 for n in xs]
            ax.plot(xs, ys, "o-", label=m, color=f"C{methods.index(m)}")
        ax.set_xscale("log", base=2)
        ax.set(title=f"{dataset}: throughput", xlabel="concurrency (sequences)", ylabel="output tokens / s")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    save(fig, path)
    return True

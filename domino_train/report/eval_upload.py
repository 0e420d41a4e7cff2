"""Log a `domino-decode` results.json to W&B as an eval run beside the training run it measured.

The eval run (`job_type=eval`) takes the training run's project, entity, group and tags (from its resolved
config), so the dashboard shows training and decoding of one variant together. It holds a table of
tau / speedup / tokens per second per dataset and method, bar charts of the mean speedup and tau per
method, domino-decode's own plot, and `eval/<method>/{tau,speedup}` in its summary (what the online
report reads). Its id is derived from the training run's, so logging the same results again updates it.
Offline (WANDB_MODE=offline) it is written under `<results folder>/wandb/`, for `wandb sync`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from domino_train.report.eval_results import drafter_results
from domino_train.report.records import RunRecord


def eval_run_id(run: RunRecord, results_path: Path) -> str:
    """`<training run id>-eval-<hash of the results folder>` (W&B ids are at most 64 characters here)."""
    digest = hashlib.sha1(str(Path(results_path).resolve().parent).encode()).hexdigest()[:6]
    return f"{run.key[: 64 - 12]}-eval-{digest}"


def log_eval(run: RunRecord, results_path: Path) -> str:
    """Log `results_path` as an eval run of `run`; returns the W&B run id."""
    import wandb

    data = drafter_results(results_path)
    logger = ((run.config.get("logger") or {}).get("wandb")) or {}
    rows = [
        [dataset, method, m.get("tau"), m.get("speedup"), m.get("tokens_per_s")]
        for dataset, by_method in (data.get("results") or {}).items()
        for method, m in by_method.items()
    ]
    means = [[method, m.get("tau"), m.get("speedup")] for method, m in data["mean"].items()]
    run_id = eval_run_id(run, results_path)
    config: dict[str, Any] = {"train_run": run.key, "drafter": data["drafter"], "decode": data.get("config")}
    with wandb.init(
        project=logger.get("project", "domino"),
        entity=logger.get("entity"),
        group=logger.get("group") or run.config.get("task_name"),
        tags=list(logger.get("tags") or []),
        job_type="eval",
        id=run_id,
        name=f"{run.config.get('task_name', 'run')}-eval",
        resume="allow",
        config=config,
        dir=str(Path(results_path).resolve().parent),
    ) as w:
        table = wandb.Table(columns=["dataset", "method", "tau", "speedup", "tokens_per_s"], data=rows)
        mean_table = wandb.Table(columns=["method", "tau", "speedup"], data=means)
        logged: dict[str, Any] = {
            "eval/results": table,
            "eval/speedup_by_method": wandb.plot.bar(mean_table, "method", "speedup", title="mean speedup"),
            "eval/tau_by_method": wandb.plot.bar(mean_table, "method", "tau", title="mean tau"),
        }
        plot = Path(results_path).parent / (data.get("plot") or "plot.png")
        if plot.is_file():
            logged["eval/plot"] = wandb.Image(str(plot))
        w.log(logged)
        for method, tau, speedup in means:
            w.summary[f"eval/{method}/tau"] = tau
            w.summary[f"eval/{method}/speedup"] = speedup
    return run_id

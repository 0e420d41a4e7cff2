"""Runs from the W&B server (online): training runs with their full history, plus the eval runs' results.

Training runs are those with `job_type=train` in `entity/project` (optionally one `group`, and all of some
`tags`); their config is the resolved run config that `AblationWandbLogger` logs at the top level. Eval
runs (`job_type=eval`, written by `domino-report --log-eval`) carry `train_run` in their config and
`eval/<method>/{tau,speedup}` in their summary.
"""

from __future__ import annotations

from typing import Any

from domino_train.report.local_runs import WANDB_STEP
from domino_train.report.records import ReportError, RunRecord, curves_from_rows


def _api() -> Any:
    try:
        import wandb
    except ImportError:
        raise ReportError("--wandb needs the wandb package: pip install wandb") from None
    try:
        return wandb.Api(timeout=60)
    except Exception as e:  # no key, no network, bad host: wandb raises several types
        raise ReportError(
            f"cannot use the W&B API ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}): run "
            "`wandb login` or set WANDB_API_KEY, or report from local run folders instead"
        ) from None


def fetch_runs(
    project: str, group: str | None = None, tags: list[str] | None = None, api: Any = None
) -> list[RunRecord]:
    """Training runs of `project` (`entity/project`) with eval results attached; `api` defaults to wandb.Api()."""
    if project.count("/") != 1:
        raise ReportError(f"--wandb {project!r} must be ENTITY/PROJECT, e.g. my-team/domino")
    api = api or _api()
    filters: dict[str, Any] = {}
    if group:
        filters["group"] = group
    if tags:
        filters["tags"] = {"$all": list(tags)}
    try:
        remote = list(api.runs(project, filters=filters or None))
    except Exception as e:
        raise ReportError(
            f"cannot list the runs of {project} ({type(e).__name__}: {e}): check the name and access"
        ) from None
    runs, evals = [], []
    for r in remote:
        if r.job_type == "eval":
            evals.append(r)
        elif r.job_type in ("train", None, ""):
            rows = list(r.scan_history())
            runs.append(RunRecord(r.id, r.url, dict(r.config), curves_from_rows(rows, WANDB_STEP)))
    by_id = {r.key: r for r in runs}
    for e in evals:
        run = by_id.get(dict(e.config).get("train_run"))
        if run is None:
            continue
        summary = dict(e.summary)
        for key, value in summary.items():
            parts = key.split("/")
            if len(parts) == 3 and parts[0] == "eval" and parts[2] in ("tau", "speedup"):
                run.eval.setdefault(parts[1], {})[parts[2]] = value
    if not runs:
        raise ReportError(f"no training runs in {project} (group={group}, tags={tags}): check the filters")
    return runs

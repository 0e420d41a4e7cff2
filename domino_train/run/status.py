"""How a run folder's last attempt ended: `status.json` (RUNNING, COMPLETED or FAILED, the error, the log).

A sweep's folder holds one run folder per job; a job that failed leaves only the metrics it logged, and its
traceback sits in the launcher's log (submitit's `.submitit/<job>/<job>_<task>_log.err`), far from the run.
`train` records the attempt's state here (global rank 0 only), with that log's path where submitit runs the
job, so that `domino-report` can list failed jobs with their logs. A process killed outright (SIGKILL, a
node lost) leaves RUNNING behind: the report says so, and Slurm's own state has the last word.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from lightning.pytorch.utilities.rank_zero import rank_zero_only

STATUS_FILE = "status.json"


def job_log() -> str | None:
    """The log this process writes to (stdout, where `train` logs a failure's traceback) where submitit
    started it; None elsewhere (sbatch's --output is the user's and unknown here)."""
    if "SUBMITIT_FOLDER" not in os.environ and "SUBMITIT_EXECUTOR" not in os.environ:
        return None
    import submitit

    try:
        return str(submitit.JobEnvironment().paths.stdout)
    except RuntimeError:  # not inside a submitit job after all
        return None


def write_status(run_dir: str | Path, state: str, error: BaseException | None = None) -> None:
    """Record this attempt's `state` in `run_dir/status.json` (atomically; only global rank 0 writes)."""
    if rank_zero_only.rank != 0:
        return
    status: dict[str, Any] = {"state": state, "log": job_log(), "slurm_job": os.environ.get("SLURM_JOB_ID")}
    if error is not None:
        status["error"] = f"{type(error).__name__}: {error}".strip()[:2000]
    path = Path(run_dir) / STATUS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{STATUS_FILE}.{os.getpid()}")
    tmp.write_text(json.dumps(status, indent=1))
    os.replace(tmp, path)


def read_status(run_dir: Path) -> dict[str, Any] | None:
    """The recorded status of `run_dir`, or None where none was written (an older run, or another tool's)."""
    path = Path(run_dir) / STATUS_FILE
    return json.loads(path.read_text()) if path.is_file() else None

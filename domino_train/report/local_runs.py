"""Runs from this machine's disk: run folders (CSV metrics + export) and offline W&B runs.

A run folder is what `python -m domino_train` writes (`artifacts/runs/<task>/<run_id>/` or a sweep's
`artifacts/runs/multirun/<sweep_id>/<n>_<task>/`). Its resolved config comes from `csv/hparams.yaml`
(written when training starts) or `export/training_config.yaml` (when it ends), its curves from
`csv/metrics.csv`; without a CSV logger, from the offline W&B files in `wandb/`. A lone offline W&B run
(`offline-run-*` folder or `.wandb` file) is read on its own. `status.json` says how the last attempt ended
(`domino_train.run.status`): a failed run is read with whatever it logged, even nothing, and its log.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import yaml

from domino_train.report.records import ReportError, RunRecord, curves_from_rows
from domino_train.report.wandb_file import WandbFileError, merge, offline_run_files, read_wandb_file
from domino_train.run.status import STATUS_FILE, read_status

WANDB_STEP = "trainer/global_step"  # Lightning's x-axis in W&B


def _is_run_dir(path: Path) -> bool:
    return (
        (path / "csv" / "metrics.csv").is_file()
        or (path / "csv" / "hparams.yaml").is_file()
        or (path / STATUS_FILE).is_file()
        or bool(offline_run_files(path))
    )


def find_run_dirs(path: Path) -> list[Path]:
    """`path` if it is a run folder (or an offline W&B run), else every run folder below it, sorted."""
    if not path.exists():
        raise ReportError(f"{path} does not exist: pass run folders, sweep folders or offline W&B runs")
    if path.suffix == ".wandb" or path.name.startswith("offline-run-") or _is_run_dir(path):
        return [path]
    found = {p.parent.parent for p in path.rglob("csv/metrics.csv")} | {p.parent for p in path.rglob("wandb")}
    found = sorted(found | {p.parent for p in path.rglob(STATUS_FILE)})
    found = [p for p in found if _is_run_dir(p) and ".submitit" not in p.parts]
    if not found:
        raise ReportError(f"no training runs under {path}: expected <run>/csv/metrics.csv or <run>/wandb/offline-run-*")
    return found


def _config(run_dir: Path) -> dict[str, Any] | None:
    hparams = run_dir / "csv" / "hparams.yaml"
    if hparams.is_file():
        config = (yaml.safe_load(hparams.read_text()) or {}).get("run_config")
        if config:
            return config
    exported = run_dir / "export" / "training_config.yaml"
    return yaml.safe_load(exported.read_text()) if exported.is_file() else None


def _wandb_run(files: list[Path]) -> Any:
    try:
        return merge([read_wandb_file(f) for f in files])
    except WandbFileError as e:
        raise ReportError(f"{e}: pass the run folder or its wandb/offline-run-* folder") from e


def load_run(path: Path) -> RunRecord:
    """One run from a run folder, an `offline-run-*` folder or a `.wandb` file."""
    if path.suffix == ".wandb" or path.name.startswith("offline-run-"):
        files = [path] if path.suffix == ".wandb" else sorted(path.glob("run-*.wandb"))
        if not files:
            raise ReportError(f"{path} holds no run-*.wandb file: pass an offline W&B run folder")
        run = _wandb_run(files)
        return RunRecord(run.run_id or path.stem, str(path), run.config, curves_from_rows(run.rows, WANDB_STEP))
    wandb_files = offline_run_files(path)
    wandb_run = _wandb_run(wandb_files) if wandb_files else None
    config = _config(path) or (wandb_run.config if wandb_run else None)
    status = read_status(path) or {}
    key = wandb_run.run_id if wandb_run and wandb_run.run_id else f"{path.parent.name}/{path.name}"
    if status.get("state") not in (None, "COMPLETED"):  # listed with its state and log, whatever it logged
        curves = _curves(path, wandb_run)
        return RunRecord(key, str(path), config or {}, curves, state=status["state"], log=status.get("log"))
    if not config:
        raise ReportError(
            f"{path} has no resolved config (csv/hparams.yaml, export/training_config.yaml or an offline W&B run): "
            "is it a domino_train run folder?"
        )
    curves = _curves(path, wandb_run)
    if not curves:
        raise ReportError(
            f"{path} has no logged metrics yet: train with logger=csv or logger=wandb, or wait for step 1"
        )
    export = path / "export"
    exported = export if (export / "config.json").is_file() else None
    return RunRecord(key, str(path), config, curves, exported, state=status.get("state"), log=status.get("log"))


def _curves(path: Path, wandb_run: Any) -> dict[str, Any]:
    metrics = path / "csv" / "metrics.csv"
    if metrics.is_file():
        with open(metrics, newline="") as f:
            return curves_from_rows(csv.DictReader(f), "step")
    return curves_from_rows(wandb_run.rows, WANDB_STEP) if wandb_run is not None else {}


def load_local_runs(paths: list[Path]) -> list[RunRecord]:
    """Every run under `paths` (see `find_run_dirs`), each once."""
    seen: dict[Path, RunRecord] = {}
    for path in paths:
        for run_dir in find_run_dirs(Path(path)):
            seen.setdefault(run_dir.resolve(), load_run(run_dir))
    return list(seen.values())

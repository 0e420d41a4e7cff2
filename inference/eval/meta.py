"""What results.json says about the run besides its numbers: the target, drafters, precision, kernels,
options, cost model, threads, versions, the whole config and the machine's load while it was timed."""

from __future__ import annotations

import logging
import os
import subprocess
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from inference.decoding.options import TreeOptions
from inference.eval import machine_load
from inference.eval.machine_load import LoadMonitor
from inference.kernels.table import cpu_model
from inference.precision import computes_bf16
from inference.targets.adapter import TargetModel
from inference.targets.engine import engine_report

log = logging.getLogger("domino-decode")


def git_commit() -> str | None:
    """The commit of the checkout this code runs from, or None outside one."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent)
    except OSError:
        return None
    return out.stdout.strip() or None


def run_meta(
    cfg: DictConfig,
    target: TargetModel,
    has_drafters: bool,
    cost_model: dict[str, Any],
    tree: TreeOptions,
    noise_window: int | None,
    load: LoadMonitor,
) -> dict[str, Any]:
    """The run's description, ending with the machine's load (and its warning, logged, when it was busy)."""
    meta = {
        "target": target.name,
        "drafter": str(cfg.drafter_path) if cfg.drafter_path and has_drafters else None,
        "baseline_drafter": str(cfg.baseline_drafter_path) if cfg.baseline_drafter_path else None,
        "device": str(target.device),
        "cpu": cpu_model(),  # every figure names the machine it came from
        "computes_bf16": computes_bf16(target.device),  # False: bf16 arithmetic is emulated, slowly
        "dtype": str(target.dtype).removeprefix("torch."),
        "precision": target.precision_name,
        "engine": target.engine,
        "precision_choice": target.precision.to_dict() if target.precision else None,
        "kernels": engine_report(target),
        "temperature": cfg.temperature,
        "verify": cfg.verify,
        "noise_window": noise_window,
        "cost_model": cost_model,
        "tree": {**asdict(tree), "verify": cfg.tree.verify},
        "max_new_tokens": cfg.max_new_tokens,
        "threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "omp_wait_policy_choice": machine_load.WAIT_POLICY_CHOICE,  # why (inference/cli/__init__.py)
        "torch": torch.__version__,
        "git_commit": git_commit(),
        "config": OmegaConf.to_container(cfg, resolve=True),
    }
    load_report = load.report()
    meta["machine_load"] = load_report
    if load_report and load_report.get("warning"):
        meta["warning"] = load_report["warning"]
        log.warning(load_report["warning"])
    return meta

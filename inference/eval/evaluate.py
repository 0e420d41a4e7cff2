"""`evaluate(cfg, out_dir)`: the evaluation `domino-decode` runs, as named steps.

Everything that can be refused is refused before the target is loaded (options, counts, prompt sets,
drafters); each finished prompt's records are appended to the run's `records.jsonl` (a rerun in the same
folder resumes), and the result files are rebuilt from all the records at the end.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, open_dict

from inference.eval.concurrency import concurrency_levels
from inference.eval.costs import cost_report, measure_costs
from inference.eval.datasets import load_benchmarks, run_benchmarks
from inference.eval.decoders import build_decoders, verify_window
from inference.eval.drafters import drafter_paths, load_drafters, warn_on_other_chat_templates
from inference.eval.loop import warm_up
from inference.eval.machine_load import LoadMonitor, free_cores
from inference.eval.meta import run_meta
from inference.eval.options import MethodOptions, check_counts, measured_settings, method_options, run_methods
from inference.eval.recheck import PrecisionRecheck
from inference.eval.records import RecordLog
from inference.eval.results import write_outputs
from inference.eval.target import load_planned_target, plan_target

log = logging.getLogger("domino-decode")


def use_threads(cfg: DictConfig) -> None:
    """torch's CPU threads: `auto` on a CPU = the cores other processes leave free, N = N, null = torch's."""
    if cfg.num_threads == "auto" and torch.device(cfg.target.get("device") or "cpu").type == "cpu":
        threads = free_cores()
        if threads < (os.cpu_count() or 1):
            log.warning("other processes are using the CPU: decoding on the %d free core(s)", threads)
        torch.set_num_threads(threads)
    elif isinstance(cfg.num_threads, int):
        torch.set_num_threads(cfg.num_threads)


def evaluate(cfg: DictConfig, out_dir: Path) -> dict[str, Any]:
    """The whole evaluation; returns the report written to `out_dir/results.json`."""
    methods = run_methods(cfg)
    check_counts(cfg)
    options = method_options(cfg, methods)
    use_threads(cfg)
    benchmarks = load_benchmarks(cfg)
    paths = drafter_paths(cfg, methods)
    record_log = RecordLog(out_dir)
    previous = record_log.start(measured_settings(cfg))
    if previous:
        log.info("resuming %s: %d generations already recorded", out_dir, len(previous))
    plan = plan_target(cfg)
    drafters = load_drafters(paths, plan)
    target = load_planned_target(cfg, plan, drafters)
    warn_on_other_chat_templates(paths, target)
    decoders = build_decoders(methods, target, drafters, paths, options)
    log.info(
        "target %s on %s (%s, %s engine, %s kernels); methods %s; benchmarks %s",
        target.name,
        target.device,
        target.precision_name,
        target.engine,
        target.kernel_policy.describe() if target.kernel_policy else "plain",
        methods,
        list(benchmarks),
    )
    load = LoadMonitor()
    verify_curves = measure_costs(decoders, target, benchmarks)
    if cfg.warmup_tokens:
        warm_up(decoders, target, cfg.warmup_tokens, concurrency_levels(cfg.concurrency))
    check_lossless = options.sampling.greedy and "ar" in methods
    noise_window = verify_window(decoders) if check_lossless else None
    recheck = precision_recheck(cfg, methods, paths, options, target.precision_name) if check_lossless else None
    records = run_benchmarks(cfg, benchmarks, decoders, target, previous, record_log.append, noise_window, recheck)
    costs = cost_report(decoders, verify_curves)
    meta = run_meta(cfg, target, bool(drafters), costs, options.tree, noise_window, load)
    return write_outputs(out_dir, records, check_lossless=check_lossless, meta=meta)


def precision_recheck(
    cfg: DictConfig, methods: list[str], paths: dict[str, str], options: MethodOptions, precision: str
) -> PrecisionRecheck | None:
    """The run's decoders again in `cfg.lossless_recheck`'s precision, loaded at the first flag of clause
    (c) (`inference.eval.recheck`); None when it is off or the run's own `precision`."""
    dtype = cfg.get("lossless_recheck")
    if not dtype or dtype == precision:
        return None

    def build() -> dict[str, Any]:
        fine = cfg.copy()
        with open_dict(fine):
            fine.target.dtype = dtype
        plan = plan_target(fine)
        drafters = load_drafters(paths, plan)
        return build_decoders(methods, load_planned_target(fine, plan, drafters), drafters, paths, options)

    return PrecisionRecheck(build, dtype, cfg.max_new_tokens)

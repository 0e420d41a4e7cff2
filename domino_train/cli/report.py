"""`domino-report`: the ablation comparison (Markdown table + PNG plots) from runs on disk and/or on W&B.

    domino-report artifacts/runs/multirun/ablations                     # a sweep's folder (every run below)
    domino-report artifacts/runs/tiny/run-a artifacts/runs/tiny/run-b   # run folders, offline W&B runs too
    domino-report RUN_DIRS --eval out/decode/results.json --log-eval    # + domino-decode numbers, logged to W&B
    domino-report --wandb my-team/domino --group qwen3_8b               # online: the W&B project's runs

Writes `report.md`, `curves.png` and `by_position.png` to `--out` and prints the table; runs whose last
attempt did not complete (`status.json`: FAILED, STOPPED, RUNNING) are listed under it with their logs.
Without the console script (an older install): `python -m domino_train.report ...`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from omegaconf import OmegaConf

from domino_conf import CONF_DIR
from domino_train.report.eval_results import attach_eval, drafter_results
from domino_train.report.local_runs import load_local_runs
from domino_train.report.plots import X_AXES, plot_by_position, plot_curves, plot_predicted_vs_realised
from domino_train.report.records import ReportError, RunRecord
from domino_train.report.table import markdown_table, report_markdown, unfinished_table
from domino_train.report.variants import group_variants
from domino_train.report.wandb_api import fetch_runs


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="domino-report", description=__doc__.splitlines()[0])
    p.add_argument("paths", nargs="*", type=Path, help="run folders, sweep folders, offline W&B runs")
    p.add_argument("--wandb", metavar="ENTITY/PROJECT", help="also read this W&B project's runs (online)")
    p.add_argument("--group", help="with --wandb: only this W&B group")
    p.add_argument("--tag", action="append", default=[], help="with --wandb: only runs with this tag (repeatable)")
    p.add_argument(
        "--eval", action="append", type=Path, default=[], metavar="RESULTS_JSON", help="domino-decode results"
    )
    p.add_argument("--log-eval", action="store_true", help="log each --eval to W&B as a job_type=eval run")
    p.add_argument(
        "--out",
        type=Path,
        help="folder for report.md and the PNGs (default: artifacts/report in $DOMINO_ROOT, else here)",
    )
    p.add_argument("--title", default="Domino ablations", help="the report's heading")
    p.add_argument(
        "--x", choices=sorted(X_AXES), default="step", help="x-axis of curves.png: steps, blocks seen or minutes"
    )
    return p


def default_out() -> Path:
    """`report/` in the artifacts folder of `conf/paths` (under `$DOMINO_ROOT` when set, as training's runs)."""
    paths = OmegaConf.create({"paths": OmegaConf.load(Path(CONF_DIR, "paths", "default.yaml"))})
    return Path(paths.paths.artifacts_dir) / "report"


def collect(args: argparse.Namespace) -> tuple[list[RunRecord], list[tuple[Path, RunRecord]]]:
    """The runs the arguments name with eval results attached, and the (results.json, run) pairs."""
    if not args.paths and not args.wandb:
        raise ReportError("nothing to report: pass run or sweep folders, or --wandb ENTITY/PROJECT")
    runs = load_local_runs(args.paths)
    if args.wandb:
        runs += fetch_runs(args.wandb, args.group, args.tag)
    return runs, attach_eval(runs, args.eval)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        runs, evaluated = collect(args)
        if args.log_eval:
            if not evaluated:
                raise ReportError("--log-eval needs --eval RESULTS_JSON (domino-decode's output)")
            from domino_train.report.eval_upload import log_eval

            for path, run in evaluated:
                print(f"logged {path} to W&B as eval run {log_eval(run, path)}")
    except ReportError as e:
        sys.exit(f"domino-report: {e}")
    args.out = args.out or default_out()
    variants = group_variants([r for r in runs if r.finished])
    unfinished = unfinished_table(runs)
    args.out.mkdir(parents=True, exist_ok=True)
    plots = []
    if variants:
        plots = [
            plot_curves(variants, args.out / "curves.png", args.x).name,
            plot_by_position(variants, args.out / "by_position.png").name,
        ]
    results = [(str(p), drafter_results(p)) for p in args.eval]
    if calibration := plot_predicted_vs_realised(results, args.out / "predicted_vs_realised.png"):
        plots.append(calibration.name)
    (args.out / "report.md").write_text(report_markdown(variants, args.title, plots, unfinished))
    print(markdown_table(variants))
    if unfinished:
        print(unfinished)
    n_unfinished = sum(not r.finished for r in runs)
    print(f"report: {args.out / 'report.md'} ({len(runs)} runs, {len(variants)} variants, {n_unfinished} unfinished)")
    return 0

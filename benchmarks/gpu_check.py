"""Prove every CUDA code path in one run and time what the papers time: `bash benchmarks/gpu_check.sh OUT_DIR`.

    python benchmarks/gpu_check.py OUT_DIR             # on one CUDA GPU, within 8 minutes
    python benchmarks/gpu_check.py OUT_DIR --dry-run   # every stage on tiny shapes on the CPU, no timings claimed
    python benchmarks/gpu_check.py OUT_DIR --stages bit_identity tree_build   # a subset

Stages (each in its own process, under its own time budget, so a crash, a hang or a CUDA error in one
is recorded and the next still runs; the dry run enforces no budget, since its wall time is whatever a
possibly loaded CPU gives it): `gpu_tests` (pytest -m gpu), `bit_identity` (CUDA-graph tree and
chain vs the eager references), `training` (flex vs SDPA bf16 steps, a ZeRO-2 step through the recipe's
config), `tree_build` (ms per round, eager vs graphs; head overhead), `decoding` (SmolLM2 with the
reference drafters, every method), `budgets` (fixed tree budgets against `tree.budget=auto`), `engine`
(`ar`'s step and verify windows 1-32 on the lean engine and on HF's forward), `concurrency` (batched
`ar` and the cost-aware arms at concurrency 1 / 4 / 16). Each
writes OUT_DIR/stages/NAME.json; this script gathers them into OUT_DIR/summary.json and
OUT_DIR/summary.md and exits 0 only when no stage failed.
What each stage checks: benchmarks/checks/ and docs/gpu.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:  # the checkout's packages, whatever is installed
    sys.path.insert(0, str(ROOT))

TOTAL_BUDGET_S = 480  # the whole check fits in 8 minutes


@dataclass(frozen=True)
class Stage:
    """One stage: its name, what it runs (argv) and the seconds it may take (None: no limit)."""

    name: str
    argv: list[str]
    budget_s: int | None


@dataclass
class StageResult:
    name: str
    status: str  # ok | failed | skipped
    wall_s: float
    budget_s: int | None
    error: str | None = None
    results: dict = field(default_factory=dict)
    tables: list = field(default_factory=list)  # [{"title", "header", "rows"}] for the Markdown summary


# (name, time budget in seconds): the budgets add up to at most TOTAL_BUDGET_S
STAGE_BUDGETS = {
    "gpu_tests": 100,
    "bit_identity": 45,
    "training": 85,
    "tree_build": 60,
    "decoding": 65,
    "budgets": 60,
    "engine": 25,
    "concurrency": 40,
}
# A stage runs the module `checks.<stage name>` unless named here: the tree_build stage's module is
# checks/tree_timing.py, so that it is not mistaken for benchmarks/tree_build.py, which it imports.
STAGE_MODULES = {"tree_build": "tree_timing"}


def default_stages(out_dir: Path, dry_run: bool, names: list[str] | None = None) -> list[Stage]:
    """The stages to run, in order (all by default): each re-enters this script with `--stage NAME`.

    The budgets are the GPU run's; the dry run gets none: it claims no timings, and on a CPU shared with
    other jobs its stages take several times their unloaded wall time."""
    names = names or list(STAGE_BUDGETS)
    unknown = sorted(set(names) - set(STAGE_BUDGETS))
    if unknown:
        raise SystemExit(f"unknown stage(s) {unknown}; choose from {list(STAGE_BUDGETS)}")
    flags = ["--dry-run"] if dry_run else []
    me = [sys.executable, str(Path(__file__).resolve()), str(out_dir)]
    return [Stage(n, [*me, "--stage", n, *flags], None if dry_run else STAGE_BUDGETS[n]) for n in names]


def _tail(text: str, n: int = 3000) -> str:
    return text if len(text) <= n else "..." + text[-n:]


def checkout_conf_path(out_dir: Path) -> Path:
    """A folder whose `domino_conf` is this checkout's `conf/`: the Hydra tree ships as the package
    `domino_conf`, which an install elsewhere (an editable one of another checkout) would otherwise provide."""
    shim = out_dir / "pythonpath"
    link = shim / "domino_conf"
    shim.mkdir(parents=True, exist_ok=True)
    if not (link.is_symlink() and link.resolve() == (ROOT / "conf").resolve()):
        link.unlink(missing_ok=True)
        link.symlink_to(ROOT / "conf", target_is_directory=True)
    return shim


def run_stage(stage: Stage, out_dir: Path) -> StageResult:
    """Run one stage's process under its budget; its report (stages/NAME.json) decides the status, and a
    process that died without one is a failure whose error is the end of its output."""
    report = out_dir / "stages" / f"{stage.name}.json"
    report.unlink(missing_ok=True)
    log = out_dir / "logs" / f"{stage.name}.log"
    paths = [str(ROOT), str(checkout_conf_path(out_dir)), os.environ.get("PYTHONPATH")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, paths)))
    t0 = time.perf_counter()
    # A session of its own, so a stage that runs past its budget is ended with every process it started.
    proc = subprocess.Popen(
        stage.argv,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=stage.budget_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        timed_out = True
    rc = proc.returncode
    wall = time.perf_counter() - t0
    log.write_text(output)
    if timed_out:
        error = f"timed out after {stage.budget_s} s; the end of its output:\n{_tail(output)}"
        return StageResult(stage.name, "failed", wall, stage.budget_s, error)
    if not report.is_file():
        return StageResult(stage.name, "failed", wall, stage.budget_s, f"exit status {rc}, no report:\n{_tail(output)}")
    data = json.loads(report.read_text())
    status = data.get("status", "failed")
    error = data.get("error")
    if rc != 0 and status == "ok":  # the report says ok but the process did not
        status, error = "failed", f"exit status {rc} after an ok report:\n{_tail(output)}"
    return StageResult(stage.name, status, wall, stage.budget_s, error, data.get("results", {}), data.get("tables", []))


def run_stages(stages: list[Stage], out_dir: Path) -> list[StageResult]:
    """Every stage in order, whatever the previous ones did; progress goes to stdout."""
    results = []
    for stage in stages:
        limit = "no time limit" if stage.budget_s is None else f"budget {stage.budget_s} s"
        print(f"[gpu_check] {stage.name} ({limit}) ...", flush=True)
        result = run_stage(stage, out_dir)
        print(f"[gpu_check] {stage.name}: {result.status} in {result.wall_s:.1f} s", flush=True)
        if result.error:
            print(_tail(result.error, 1500), flush=True)
        results.append(result)
    return results


def environment() -> dict:
    """Where the check ran: host, Python, torch, CUDA device (when there is one)."""
    import torch

    env = {"host": platform.node(), "python": platform.python_version(), "torch": torch.__version__}
    if torch.cuda.is_available():
        env.update(cuda=torch.version.cuda, gpu=torch.cuda.get_device_name(0), gpus=torch.cuda.device_count())
    return env


def headline(error: str | None) -> str:
    """One line of an error for the stage table: a traceback's last line (the exception), else the first."""
    lines = [line.strip() for line in (error or "").strip().splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[-1] if lines[0].startswith("Traceback") else lines[0]
    return line.replace("|", "/")[:200]


def markdown(summary: dict) -> str:
    """The human summary: one line per stage, then each stage's tables and errors."""
    mode = "dry run (tiny shapes, CPU, no timings claimed)" if summary["dry_run"] else "GPU run"
    lines = [
        f"# GPU check: {'all stages passed' if summary['ok'] else 'FAILED'}",
        "",
        f"{mode}; {summary['total_s']:.1f} s in all; started {summary['started']}; "
        + ", ".join(f"{k} {v}" for k, v in summary["environment"].items()),
        "",
        "| stage | status | wall s | budget s | error |",
        "| --- | --- | --- | --- | --- |",
    ]
    for s in summary["stages"]:
        budget = "none" if s["budget_s"] is None else s["budget_s"]
        lines.append(f"| {s['name']} | {s['status']} | {s['wall_s']:.1f} | {budget} | {headline(s['error'])} |")
    for s in summary["stages"]:
        for table in s["tables"]:
            lines += ["", f"## {s['name']}: {table['title']}", "", "| " + " | ".join(table["header"]) + " |"]
            lines.append("|" + " --- |" * len(table["header"]))
            lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in table["rows"]]
        if s["error"]:
            lines += ["", f"## {s['name']}: {s['status']}", "", "```", s["error"].rstrip(), "```"]
    return "\n".join(lines) + "\n"


def write_summary(results: list[StageResult], out_dir: Path, dry_run: bool, started: str, total_s: float) -> dict:
    """summary.json and summary.md in `out_dir`; `ok` is true when no stage failed (skips do not fail)."""
    summary = {
        "ok": all(r.status != "failed" for r in results),
        "dry_run": dry_run,
        "started": started,
        "total_s": total_s,
        "environment": environment(),
        "stages": [asdict(r) for r in results],
    }
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    (out_dir / "summary.md").write_text(markdown(summary))
    return summary


def stage_main(name: str, out_dir: Path, dry_run: bool) -> int:
    """Inside a stage's process: run its check module's `run` (`STAGE_MODULES`) and write its report, failure
    included."""
    import importlib

    from checks.context import CheckFailed, Context, StageSkipped

    report = out_dir / "stages" / f"{name}.json"
    try:
        ctx = Context.make(out_dir, dry_run)
        results, tables = importlib.import_module(f"checks.{STAGE_MODULES.get(name, name)}").run(ctx)
        data = {"status": "ok", "results": results, "tables": tables}
    except StageSkipped as e:
        data = {"status": "skipped", "error": f"skipped: {e}"}
    except CheckFailed as e:
        data = {"status": "failed", "error": f"check failed: {e}", "results": e.results, "tables": e.tables}
    except BaseException as e:  # every failure is recorded, the orchestrator goes on
        data = {"status": "failed", "error": "".join(traceback.format_exception(e))}
    report.write_text(json.dumps(data, indent=1, default=str))
    return 0 if data["status"] != "failed" else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path, help="where summary.json, summary.md, stages/ and logs/ go")
    parser.add_argument("--dry-run", action="store_true", help="tiny shapes on the CPU: checks the script, not a GPU")
    parser.add_argument("--stages", nargs="+", default=None, help=f"a subset of {list(STAGE_BUDGETS)}")
    parser.add_argument("--stage", default=None, help=argparse.SUPPRESS)  # internal: run one stage in this process
    args = parser.parse_args(argv)
    out_dir = args.out_dir.resolve()
    for sub in ("stages", "logs"):
        (out_dir / sub).mkdir(parents=True, exist_ok=True)
    if args.stage:
        return stage_main(args.stage, out_dir, args.dry_run)
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    t0 = time.perf_counter()
    results = run_stages(default_stages(out_dir, args.dry_run, args.stages), out_dir)
    summary = write_summary(results, out_dir, args.dry_run, started, time.perf_counter() - t0)
    print(f"[gpu_check] {'ok' if summary['ok'] else 'FAILED'} in {summary['total_s']:.1f} s: {out_dir / 'summary.md'}")
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

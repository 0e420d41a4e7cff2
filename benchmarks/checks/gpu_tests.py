"""Stage 1: `pytest -m gpu`, the tests of every CUDA-only branch (graph capture, flex masks, bf16 casts), then
the unmarked tests that take a CUDA branch on a GPU machine (`CUDA_BRANCH_TESTS`).

On a GPU every gpu test must run: a skip there means a test could not reach its CUDA branch, and the
stage fails. In the dry run the gpu tests are collected and skipped (no CUDA) and the CUDA-branch tests
only collected, which proves they still import.
"""

from __future__ import annotations

import re
import subprocess
import sys

from gpu_check import ROOT

from checks.context import CheckFailed, Context, table


def counts(summary_line: str) -> dict[str, int]:
    """pytest's last line ("3 passed, 1 skipped, 2 deselected in 4.1s") -> {"passed": 3, ...}."""
    return {
        word: int(n)
        for n, word in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected|xfailed)", summary_line)
    }


# Tests that are not marked gpu but take a `torch.cuda.is_available()` branch on a CUDA machine: the CLI's and
# `load_target`'s default device (cuda), and `deepspeed_strategy` (a cpu trainer must still get the CPU one).
CUDA_BRANCH_TESTS = [
    "tests/inference/cli/test_decode.py",
    "tests/domino_train/run/test_strategies.py",
    "tests/domino_train/run/test_train.py::test_deepspeed_zero_on_cpu_and_export_from_the_zero_directory[2]",
]


def _pytest(ctx: Context, name: str, args: list[str]) -> tuple[dict, list[str]]:
    """Run pytest with `args`; its counts, and its output lines (the log goes to logs/gpu_tests.NAME.log)."""
    argv = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *args]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    (ctx.out_dir / "logs" / f"gpu_tests.{name}.log").write_text(proc.stdout + proc.stderr)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    found = counts(lines[-1] if lines else "")
    result = {"command": " ".join(argv[2:]), "returncode": proc.returncode, **found}
    if proc.returncode != 0:
        raise CheckFailed(f"{' '.join(argv[2:])}: exit status {proc.returncode}:\n" + "\n".join(lines[-40:]), result)
    return result, lines


def run(ctx: Context) -> tuple[dict, list]:
    marked, lines = _pytest(ctx, "marked", ["-m", "gpu", "tests"])
    if not ctx.dry_run and marked.get("skipped", 0):
        skips = [line for line in lines if line.startswith("SKIPPED")]
        raise CheckFailed(f"{marked['skipped']} gpu test(s) skipped on a CUDA machine:\n" + "\n".join(skips), marked)
    if marked.get("passed", 0) + marked.get("skipped", 0) == 0:
        raise CheckFailed("pytest -m gpu ran no test: the gpu marker selects nothing", marked)
    # The dry run only collects the CUDA-branch tests (on a CPU they take the CPU branch the suite covers).
    branch, lines = _pytest(ctx, "cuda_branches", (["--collect-only"] if ctx.dry_run else []) + CUDA_BRANCH_TESTS)
    if ctx.dry_run:
        branch["collected"] = sum(1 for line in lines if "::" in line)
    results = {"gpu_marked": marked, "cuda_branches": branch}
    keys = ["passed", "failed", "skipped", "deselected", "collected"]
    rows = [[name, *[r.get(k, 0) for k in keys]] for name, r in (("-m gpu", marked), ("CUDA-branch tests", branch))]
    return results, [table("pytest", ["run", *keys], rows)]

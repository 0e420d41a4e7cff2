"""Stage 1: `pytest -m gpu`, the tests of every CUDA-only branch (graph capture, flex masks, bf16 casts).

On a GPU every one of them must run: a skip there means a test could not reach its CUDA branch, and the
stage fails. In the dry run they are collected and skipped (no CUDA), which proves they still import.
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


def run(ctx: Context) -> tuple[dict, list]:
    argv = [sys.executable, "-m", "pytest", "-q", "-rs", "-m", "gpu", "-p", "no:cacheprovider", "tests"]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    (ctx.out_dir / "logs" / "gpu_tests.pytest.log").write_text(proc.stdout + proc.stderr)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    found = counts(lines[-1] if lines else "")
    results = {"returncode": proc.returncode, "command": " ".join(argv[1:]), **found}
    rows = [[k, v] for k, v in found.items()]
    if proc.returncode != 0:
        raise CheckFailed(f"pytest -m gpu exit status {proc.returncode}:\n" + "\n".join(lines[-40:]), results)
    if not ctx.dry_run and found.get("skipped", 0):
        skips = [line for line in lines if line.startswith("SKIPPED")]
        raise CheckFailed(f"{found['skipped']} gpu test(s) skipped on a CUDA machine:\n" + "\n".join(skips), results)
    if found.get("passed", 0) + found.get("skipped", 0) == 0:
        raise CheckFailed("pytest -m gpu ran no test: the gpu marker selects nothing")
    return results, [table("pytest -m gpu", ["outcome", "tests"], rows)]

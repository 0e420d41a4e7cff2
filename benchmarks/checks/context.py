"""What every stage of the GPU check is given: device, dtype, dry-run flag, output folder, and a table type."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch


class StageSkipped(Exception):
    """A stage that cannot run here (e.g. no pretrained drafters): recorded as skipped, not failed."""


class CheckFailed(AssertionError):
    """A stage ran but what it checks does not hold (a mismatch, a loss gap); it carries what was measured,
    so the summary shows the figures next to the failure."""

    def __init__(self, message: str, results: dict | None = None, tables: list | None = None) -> None:
        super().__init__(message)
        self.results, self.tables = results or {}, tables or []


@dataclass(frozen=True)
class Context:
    out_dir: Path
    dry_run: bool
    device: str  # cuda on a GPU run, cpu in the dry run
    dtype: torch.dtype  # bf16 on a GPU run, fp32 in the dry run

    @classmethod
    def make(cls, out_dir: Path, dry_run: bool) -> Context:
        """The dry run is the CPU in fp32; a real run insists on CUDA (a GPU check without a GPU proves nothing)."""
        if dry_run:
            return cls(out_dir, True, "cpu", torch.float32)
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device: run on a GPU machine, or pass --dry-run to check the script on a CPU")
        return cls(out_dir, False, "cuda", torch.bfloat16)

    def sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()


def table(title: str, header: list[str], rows: list[list]) -> dict:
    """A table for the Markdown summary (floats rounded to 3 significant decimals)."""
    fmt = [[f"{c:.3f}" if isinstance(c, float) else c for c in row] for row in rows]
    return {"title": title, "header": header, "rows": fmt}

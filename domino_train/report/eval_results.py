"""`domino-decode` results (`results.json`) joined to the training runs whose exported drafter they measured.

`results.json` holds `drafter` (the drafter folder it loaded), `mean: {method: {tau, speedup, ...}}` over
its datasets, and `results: {dataset: {method: {...}}}`. A run matches when its `export/` folder is that
drafter folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from domino_train.report.records import ReportError, RunRecord
from inference.eval.results import ResultsFileError, read_results


def drafter_results(path: Path) -> dict[str, Any]:
    """A `domino-decode` results.json (`inference.eval.results.read_results`) that measured a drafter: the
    report joins results to runs by it."""
    try:
        data = read_results(path)
    except ResultsFileError as e:
        raise ReportError(str(e)) from None
    if not data.get("drafter"):
        raise ReportError(f"{path} measured no drafter (an `ar`-only domino-decode run): nothing to join to a run")
    return data


def attach_eval(runs: list[RunRecord], paths: list[Path]) -> list[tuple[Path, RunRecord]]:
    """Set `run.eval` (method -> {tau, speedup}) from each results.json on the run whose export it measured;
    returns the (results.json, run) pairs."""
    by_export = {r.export_dir.resolve(): r for r in runs if r.export_dir is not None}
    matched = []
    for path in paths:
        data = drafter_results(path)
        drafter = Path(data["drafter"])
        if not drafter.is_absolute():  # domino-decode records it as given; relative to where it ran
            drafter = Path(path).parent / drafter
        run = by_export.get(drafter.resolve())
        if run is None:
            raise ReportError(
                f"{path} measured the drafter {data['drafter']}, which is not the export/ of any run given: "
                "add that run's folder to the report"
            )
        for method, metrics in data["mean"].items():
            if method != "ar":
                run.eval[method] = {"tau": metrics.get("tau"), "speedup": metrics.get("speedup")}
        matched.append((Path(path), run))
    return matched


def eval_method(run: RunRecord) -> str | None:
    """The decoding method that represents a run: `domino` with a head, `dflash` without, else the first."""
    preferred = "domino" if run.has_head else "dflash"
    return preferred if preferred in run.eval else next(iter(run.eval), None)

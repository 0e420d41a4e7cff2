"""The ablation table: one row per variant, mean (± std over seeds) of each run's best validation numbers."""

from __future__ import annotations

import statistics

from domino_train.report.eval_results import eval_method
from domino_train.report.records import RunRecord
from domino_train.report.variants import Variant

# (header, metric, best-of mode): the simulated acceptance length tau and the block CE, as in training's val/
COLUMNS = (
    ("val tau final (max)", "val/tau_final", "max"),
    ("val tau base (max)", "val/tau_base", "max"),
    ("val CE final (min)", "val/ce_final", "min"),
    ("val CE base (min)", "val/ce_base", "min"),
)


def _cell(values: list[float | None], spec: str = ".3f", suffix: str = "") -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    mean = statistics.fmean(values)
    if len(values) == 1:
        return f"{mean:{spec}}{suffix}"
    return f"{mean:{spec}} ± {statistics.stdev(values):{spec}}{suffix}"


def markdown_table(variants: list[Variant]) -> str:
    """The Markdown table (no trailing prose); eval columns appear when any run has domino-decode results."""
    with_eval = any(r.eval for v in variants for r in v.runs)
    header = ["variant", "seeds", "steps", *(c[0] for c in COLUMNS)]
    if with_eval:
        header += ["decode tau", "speedup"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for v in variants:
        seeds = sorted({str(r.config.get("seed")) for r in v.runs})
        steps = sorted({r.last_step() + 1 for r in v.runs if r.last_step() is not None})
        span = "-" if not steps else str(steps[0]) if len(steps) == 1 else f"{steps[0]}-{steps[-1]}"
        row = [v.label, f"{len(v.runs)} ({', '.join(seeds)})", span]
        row += [_cell([r.best(metric, mode) for r in v.runs]) for _, metric, mode in COLUMNS]
        if with_eval:
            picked = [r.eval.get(eval_method(r) or "", {}) for r in v.runs]
            row += [_cell([p.get("tau") for p in picked], ".2f"), _cell([p.get("speedup") for p in picked], ".2f", "x")]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def unfinished_table(runs: list[RunRecord]) -> str:
    """The runs whose last attempt did not complete (FAILED, STOPPED, RUNNING), each with its log; '' if none."""
    rows = [f"| {r.source} | {r.state} | {r.log or '-'} |" for r in runs if not r.finished]
    return "\n".join(["| unfinished run | state | log |", "|---|---|---|", *rows]) + "\n" if rows else ""


def report_markdown(variants: list[Variant], title: str, plots: list[str], unfinished: str = "") -> str:
    """The whole report.md: title, table, what the numbers are, the unfinished runs, and the plots."""
    notes = (
        "val tau = simulated chain acceptance length on the validation blocks (1 + leading draft tokens equal to "
        "the data, bonus included), best over validations; CE = position-weighted block cross-entropy of the "
        "base logits and of the final (base + head) logits, lowest over validations; steps = optimizer steps "
        "logged. Cells are mean ± std over seeds. decode tau / speedup come from domino-decode results.json "
        "(mean over its datasets; method `domino`, or `dflash` for drafters without head)."
    )
    images = "\n".join(f"![{p}]({p})" for p in plots)
    unfinished = f"Not in the table (their last attempt did not complete):\n\n{unfinished}\n" if unfinished else ""
    return f"# {title}\n\n{markdown_table(variants)}\n{notes}\n\n{unfinished}{images}\n"
